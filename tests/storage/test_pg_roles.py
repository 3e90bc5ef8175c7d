"""The roles docs/team.md sets up, exercised for real: CI writes the index, a
reader role reads it and cannot change it, and neither leaks its password."""

from __future__ import annotations

import subprocess
from urllib.parse import urlsplit

import pytest

from tests.conftest import MEMSTRATA


def _run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([MEMSTRATA, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def _role_url(admin_url: str, role: str, password: str) -> str:
    parts = urlsplit(admin_url)
    return f"postgresql://{role}:{password}@{parts.hostname}:{parts.port}{parts.path}"


@pytest.fixture
def team_roles(pg_cluster, pg_url):
    """The docs' three roles on a fresh database: (ci_url, reader_url)."""
    db = urlsplit(pg_url).path.lstrip("/")
    suffix = db.replace("-", "_")
    ci, reader = f"ci_{suffix}", f"reader_{suffix}"
    with pg_cluster.connect(db) as conn:
        conn.execute(f"CREATE ROLE {ci} LOGIN PASSWORD 'ci-secret-pw'")
        conn.execute(f"CREATE ROLE {reader} LOGIN PASSWORD 'reader-secret-pw'")
        conn.execute(f'GRANT CREATE ON DATABASE "{db}" TO {ci}')
        conn.execute(f"GRANT CREATE ON SCHEMA public TO {ci}")
        conn.execute(f"ALTER DEFAULT PRIVILEGES FOR ROLE {ci} GRANT USAGE ON SCHEMAS TO {reader}")
        conn.execute(f"ALTER DEFAULT PRIVILEGES FOR ROLE {ci} GRANT SELECT ON TABLES TO {reader}")
    yield _role_url(pg_url, ci, "ci-secret-pw"), _role_url(pg_url, reader, "reader-secret-pw")
    with pg_cluster.connect(db) as conn:
        for role in (ci, reader):
            conn.execute(f"DROP OWNED BY {role} CASCADE")
            conn.execute(f"DROP ROLE {role}")


def test_ci_writes_reader_reads_and_cannot_write(team_roles, project_copy, tmp_path):
    ci_url, reader_url = team_roles
    root = project_copy("python_project")
    done = _run("index", str(root), "--store", ci_url, "--project-name", "shop")
    assert done.returncode == 0, done.stderr
    # The reader answers from another folder: no checkout, no .memstrata created.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    st = _run("status", "--store", reader_url, "--project-name", "shop", "--json", cwd=elsewhere)
    assert st.returncode == 0, st.stderr
    assert '"status": "ready"' in st.stdout
    q = _run("query", "how are users stored", "--store", reader_url, "--project-name", "shop", "--json",
             cwd=elsewhere)
    assert q.returncode == 0, q.stderr
    assert '"sources"' in q.stdout
    assert not (elsewhere / ".memstrata").exists()
    # The reader role may not write: one sentence, nothing changed, no password shown.
    denied = _run("index", str(root), "--store", reader_url, "--project-name", "shop")
    assert denied.returncode == 2
    assert "read-only for this role" in denied.stderr, denied.stderr
    assert denied.stderr.count("\n") == 1 and "Traceback" not in denied.stderr
    for out in (done, st, q, denied):
        assert "secret-pw" not in out.stdout + out.stderr


def test_reader_role_cannot_create_a_project(team_roles, project_copy):
    _ci_url, reader_url = team_roles
    root = project_copy("python_project")
    denied = _run("index", str(root), "--store", reader_url, "--project-name", "other")
    assert denied.returncode == 2
    assert "read-only for this role" in denied.stderr, denied.stderr
    assert "secret-pw" not in denied.stdout + denied.stderr
