"""What the shared-store (PostgreSQL backend) suites have in common: fixture
copies, indexing one checkout into both backends, CLI environments that find
no stored password, and looks into a project's schema with admin SQL."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from memstrata.indexer.project import StoreChoice
from memstrata.indexer.workspace import Workspace
from memstrata.storage.postgres import schema_name

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
FIXTURE_NAMES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith("."))


def dbname(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def copy_fixture(name: str, parent: Path, folder: str | None = None) -> Path:
    dest = parent / (folder or name)
    shutil.copytree(FIXTURES / name, dest, ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    return dest


def index_into_both(root: Path, url: str, project: str) -> None:
    """Index one checkout into its own SQLite file and into ``project`` of ``url``.

    One parse worker each: symbol ids then follow the file order on both
    sides, so ties (broken by id) fall the same way.
    """
    with Workspace.open(root, workers=1) as ws:
        ws.index()
    with Workspace.open(root, workers=1, store=StoreChoice(url, project)) as ws:
        ws.index()


def symbol_keys(store) -> list[tuple]:
    """Every symbol as (id, path, qualname, start_byte), by id."""
    return [tuple(r) for r in store.execute(
        "SELECT s.id, f.path, s.qualname, s.start_byte FROM symbols s JOIN files f ON f.id = s.file_id "
        "ORDER BY s.id")]


def pg_cli_env(base: dict[str, str]) -> dict[str, str]:
    """A CLI environment where libpq finds no password but the URL's, and
    commands answer in-process (no resident daemon left behind)."""
    env = {k: v for k, v in base.items() if not k.startswith("PG")}
    env["PGPASSFILE"] = "/nonexistent/memstrata-tests-pgpass"  # no such file: libpq reads none
    env["MEMSTRATA_DAEMON"] = "off"
    env.pop("MEMSTRATA_STORE", None)
    return env


def run_json(run_cli, *args: str) -> dict:
    return json.loads(run_cli(*args, "--json").stdout)


def project_files(cluster, db: str, project: str) -> dict[str, int]:
    """path -> symbol count of every file row of ``project`` (admin SQL, no MemStrata code)."""
    with cluster.connect(db) as conn:
        schema = schema_name(project)
        if not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
            return {}
        if conn.execute("SELECT to_regclass(%s)", (f"{schema}.files",)).fetchone()[0] is None:
            return {}
        return dict(conn.execute(
            f"SELECT f.path, count(s.id) FROM {schema}.files f LEFT JOIN {schema}.symbols s "
            "ON s.file_id = f.id GROUP BY f.path"))


def files_without_text(cluster, db: str, project: str) -> list[str]:
    schema = schema_name(project)
    with cluster.connect(db) as conn:
        return [r[0] for r in conn.execute(
            f"SELECT f.path FROM {schema}.files f LEFT JOIN {schema}.file_text t ON t.file_id = f.id "
            "WHERE t.file_id IS NULL AND f.status <> 'skipped'")]


def derived_names(cluster, db: str, project: str) -> list[str]:
    schema = schema_name(project)
    with cluster.connect(db) as conn:
        return sorted(r[0] for r in conn.execute(f"SELECT name FROM {schema}.derived WHERE length(data) > 0"))


def sqlite_symbol_counts(root: Path) -> dict[str, int]:
    """path -> symbol count in the checkout's own SQLite index."""
    from memstrata.indexer.project import open_store

    with open_store(root, readonly=True) as store:
        return dict(store.execute(
            "SELECT f.path, count(s.id) FROM files f LEFT JOIN symbols s ON s.file_id = f.id GROUP BY f.path"))


def make_many_copies(parent: Path, names: Iterable[str], copies: int) -> Path:
    """A project of ``copies`` copies of each fixture, each under its own folder
    (big enough that an index run takes a moment)."""
    root = parent / "monorepo"
    root.mkdir()
    for i in range(copies):
        for name in names:
            shutil.copytree(FIXTURES / name, root / f"{name}_{i:03d}",
                            ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    return root


def popen(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(args, env=env, text=True, **kw)
