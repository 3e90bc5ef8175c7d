"""Index runs on a copy of fixtures/python_project: exact symbols and edges,
incremental re-runs, skipping rules, and the `memstrata index|status` CLI."""

from __future__ import annotations

import json
import os
from datetime import datetime

import pytest

from memstrata.indexer.graph import CodeGraph
from memstrata.indexer.project import open_store
from memstrata.indexer.run import Indexer
from memstrata.indexer.watcher import Changes
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci

SERVICE = "app/auth/service.py"
LOGIN = "app/auth/service.py::AuthService.login"
ALL_FILES = [
    "app/__init__.py", "app/auth/__init__.py", "app/auth/base.py", "app/auth/service.py",
    "app/reports.py", "app/routes.py", "app/session.py", "app/util/__init__.py",
    "app/util/crypto.py", "tests/test_auth.py",
]


@pytest.fixture
def project(project_copy):
    return project_copy("python_project")


@pytest.fixture
def ws(project):
    with Workspace.open(project, workers=1) as ws:
        summary = ws.index()
        assert summary.parsed == len(ALL_FILES)
        yield ws


def symbols_of(store, path):
    return set(store.execute(
        "SELECT s.qualname, s.kind FROM symbols s JOIN files f ON f.id = s.file_id WHERE f.path = ?", (path,)))


def edges(graph: CodeGraph) -> set[tuple]:
    return {(u, v, k, w) for u, v, k, w in graph.g.edges(keys=True, data="weight")}


def reindex(ws):
    """A fresh index run over the same store (as a second `memstrata index` would do)."""
    return Indexer(ws.root, ws.store, workers=1).index_all()


# -- exact symbols and edges ---------------------------------------------------


def test_symbols_of_service_exactly(ws):
    assert symbols_of(ws.store, SERVICE) == {
        ("MAX_ATTEMPTS", "constant"),
        ("InvalidCredentials", "class"),
        ("AuthService", "class"),
        ("AuthService.__init__", "method"),
        ("AuthService.login", "method"),
        ("AuthService.logout", "method"),
    }
    assert ci.file_paths(ws.store) == ALL_FILES
    spans = ws.store.execute(
        "SELECT s.start_line, s.end_line, s.parent, s.signature, s.docstring FROM symbols s "
        "JOIN files f ON f.id = s.file_id WHERE f.path = ? AND s.qualname = 'AuthService.login'", (SERVICE,))
    start, end, parent, signature, doc = spans[0]
    assert (start, end, parent) == (20, 29, "AuthService")
    assert signature.startswith("def login(self, username: str, password: str) -> bool")
    assert doc == "Return True when the password matches the stored hash."


def test_resolved_edges(ws):
    g = ws.graph
    assert g.callers(LOGIN) == [
        "app/routes.py::login_route",
        "app/session.py::SessionMiddleware.__call__",
        "tests/test_auth.py::test_login_accepts_right_password",
    ]
    assert g.callees(LOGIN) == [
        "app/auth/base.py::BaseService.audit",  # self.audit, found through the base class
        "app/auth/service.py::InvalidCredentials",
        "app/util/crypto.py::constant_time_eq",
        "app/util/crypto.py::hash_password",
    ]
    assert g.subclasses("app/auth/base.py::BaseService") == ["app/auth/service.py::AuthService"]
    assert g.bases("app/auth/service.py::AuthService") == ["app/auth/base.py::BaseService"]
    assert g.importers(SERVICE) == ["app/auth/__init__.py", "app/session.py", "tests/test_auth.py"]
    assert g.imported_files(SERVICE) == ["app/auth/base.py", "app/util/crypto.py"]
    # `from app.auth import AuthService` goes through the package's __init__ re-export.
    assert g.imported_files("app/routes.py") == ["app/auth/__init__.py", "app/session.py"]
    assert g.callers("app/auth/service.py::AuthService.logout") == ["app/routes.py::logout_route"]


def test_resolved_targets_are_persisted(ws):
    ws.graph  # resolving writes refs.target back to storage
    rows = ws.store.execute(
        "SELECT f.path, r.scope, r.target FROM refs r JOIN files f ON f.id = r.file_id "
        "WHERE r.name = 'login' ORDER BY f.path")
    assert rows == [
        ("app/routes.py", "login_route", LOGIN),
        ("app/session.py", "SessionMiddleware.__call__", LOGIN),
        ("tests/test_auth.py", "test_login_accepts_right_password", LOGIN),
    ]


# -- incremental runs ----------------------------------------------------------


def test_reindex_without_changes_parses_nothing(ws):
    summary = reindex(ws)
    assert (summary.parsed, summary.unchanged, summary.removed) == (0, len(ALL_FILES), 0)
    assert summary.files == len(ALL_FILES)
    assert summary.changed_paths == [] and summary.removed_paths == []
    assert ws.store.get_meta("status") == "ready"


def test_touching_mtime_does_not_reparse(ws, project):
    target = project / "app/util/crypto.py"
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    before = ws.store.execute("SELECT id, indexed_at FROM files WHERE path = 'app/util/crypto.py'")
    summary = reindex(ws)
    assert (summary.parsed, summary.unchanged) == (0, len(ALL_FILES))
    # The new mtime is recorded, so the next run does not even hash the file again.
    assert ci.file_states(ws.store)["app/util/crypto.py"].mtime_ns == target.stat().st_mtime_ns
    assert ws.store.execute("SELECT id, indexed_at FROM files WHERE path = 'app/util/crypto.py'") == before


def test_modifying_a_file_reparses_only_it(ws, project):
    crypto = project / "app/util/crypto.py"
    crypto.write_text(crypto.read_text() + "\n\ndef pepper(value: str) -> str:\n    return value + 'p'\n")
    summary = reindex(ws)
    assert summary.parsed == 1
    assert summary.changed_paths == ["app/util/crypto.py"]
    assert summary.unchanged == len(ALL_FILES) - 1
    assert ("pepper", "function") in symbols_of(ws.store, "app/util/crypto.py")
    ws._after_update(summary)
    assert "app/util/crypto.py::pepper" in ws.graph
    assert "app/util/crypto.py::hash_password" in ws.graph.callees(LOGIN)


def test_deleting_a_file_removes_its_symbols_and_edges(ws, project):
    g = ws.graph
    assert "app/session.py::SessionMiddleware.__call__" in g.callers(LOGIN)
    (project / "app/session.py").unlink()
    summary = reindex(ws)
    assert summary.removed_paths == ["app/session.py"]
    assert summary.parsed == 0
    assert "app/session.py" not in ci.file_paths(ws.store)
    assert ws.store.execute("SELECT count(*) FROM symbols WHERE qualname LIKE 'SessionMiddleware%'") == [(0,)]
    # No search rows are left behind for the deleted symbols.
    assert ws.store.execute(
        "SELECT count(*) FROM symbols_fts WHERE rowid NOT IN (SELECT id FROM symbols)") == [(0,)]
    assert ws.store.execute("SELECT count(*) FROM refs r LEFT JOIN files f ON f.id = r.file_id "
                            "WHERE f.id IS NULL") == [(0,)]
    # routes.py imported app.session: that import no longer resolves to a file.
    assert ws.store.execute(
        "SELECT i.target_path FROM imports i JOIN files f ON f.id = i.file_id "
        "WHERE f.path = 'app/routes.py' AND i.module = 'app.session'") == [(None,)]
    ws._after_update(summary)
    for graph in (ws.graph, CodeGraph.load(ws.store)):
        assert "app/session.py" not in graph
        assert graph.callers(LOGIN) == ["app/routes.py::login_route",
                                        "tests/test_auth.py::test_login_accepts_right_password"]
        assert graph.importers(SERVICE) == ["app/auth/__init__.py", "tests/test_auth.py"]
        assert graph.imported_files("app/routes.py") == ["app/auth/__init__.py"]
    assert edges(ws.graph) == edges(CodeGraph.load(ws.store))


def test_new_file_with_a_new_caller(ws, project):
    ws.graph
    (project / "app/admin.py").write_text(
        "from app.auth.service import AuthService\n\n\n"
        "def admin_login(name: str) -> bool:\n"
        "    return AuthService().login(name, 'secret')\n"
    )
    summary = reindex(ws)
    assert summary.changed_paths == ["app/admin.py"]
    assert summary.files == len(ALL_FILES) + 1
    ws._after_update(summary)
    for graph in (ws.graph, CodeGraph.load(ws.store)):
        assert "app/admin.py::admin_login" in graph.callers(LOGIN)
        assert "app/admin.py" in graph.importers(SERVICE)
    assert edges(ws.graph) == edges(CodeGraph.load(ws.store))


# -- skipping rules --------------------------------------------------------------


def test_gitignored_and_vendored_files_are_skipped_with_reasons(project):
    (project / ".gitignore").write_text("generated/\n*.gen.py\n")
    (project / "generated").mkdir()
    (project / "generated/models.py").write_text("def generated_model(): pass\n")
    (project / "app/schema.gen.py").write_text("def generated_schema(): pass\n")
    (project / "node_modules/left-pad").mkdir(parents=True)
    (project / "node_modules/left-pad/index.js").write_text("function leftPad() {}\n")
    (project / ".venv/lib").mkdir(parents=True)
    (project / ".venv/lib/site.py").write_text("def venv_thing(): pass\n")
    with Workspace.open(project, workers=1) as ws:
        summary = ws.index()
        assert ci.file_paths(ws.store) == ALL_FILES
        skipped = set(ws.store.execute("SELECT path, reason FROM skipped"))
        assert {("generated/", "gitignored"), ("app/schema.gen.py", "gitignored"),
                ("node_modules/", "excluded_dir"), (".venv/", "excluded_dir")} <= skipped
        assert summary.skipped["gitignored"] == 2
        # .memstrata/ itself is never indexed; it is the third excluded dir.
        assert summary.skipped["excluded_dir"] == 3
        assert ws.status().skipped == summary.skipped
        names = {r[0] for r in ws.store.execute("SELECT name FROM symbols")}
        assert not names & {"generated_model", "generated_schema", "leftPad", "venv_thing"}


# -- the CLI ---------------------------------------------------------------------


def test_cli_index_and_status_json(project, run_cli):
    out = json.loads(run_cli("index", str(project), "--json").stdout)
    assert out["project"] == str(project.resolve())
    assert (out["files"], out["parsed"], out["unchanged"], out["removed"]) == (len(ALL_FILES), len(ALL_FILES), 0, 0)
    assert out["skipped"] == {"excluded_dir": 1}

    status = json.loads(run_cli("status", str(project), "--json").stdout)
    assert status["project"] == str(project.resolve())
    assert status["files_indexed"] == len(ALL_FILES)
    assert status["status"] == "ready"
    assert status["languages"] == {"python": len(ALL_FILES)}
    assert status["skipped"] == {"excluded_dir": 1}
    assert status["symbols"] == 21
    when = datetime.fromisoformat(status["last_indexed"])
    assert when.tzinfo is not None
    assert isinstance(status["index_size_mb"], float) and status["index_size_mb"] > 0

    again = json.loads(run_cli("index", str(project), "--json").stdout)
    assert (again["parsed"], again["unchanged"]) == (0, len(ALL_FILES))

    # A changed file on disk makes the index stale until the next run.
    (project / "app/reports.py").write_text("def quarterly(): pass\n")
    status = json.loads(run_cli("status", str(project), "--json").stdout)
    assert status["status"] == "stale"

    plain = run_cli("status", str(project)).stdout
    assert "status:" in plain and "files indexed: 10" in plain


def test_cli_max_file_size_is_honoured_and_remembered(project, run_cli):
    body = "def big_function():\n" + "    x = 1\n" * 400  # ~4 KB
    (project / "app/big.py").write_text(body)
    out = json.loads(run_cli("index", str(project), "--max-file-size", "2k", "--json").stdout)
    assert out["skipped"].get("too_large") == 1
    assert out["files"] == len(ALL_FILES)
    store = open_store(project, readonly=True)
    try:
        assert store.execute("SELECT path, reason, size FROM skipped WHERE reason = 'too_large'") == [
            ("app/big.py", "too_large", len(body.encode()))]
        assert "app/big.py" not in ci.file_paths(store)
    finally:
        store.close()
    # Remembered for the project: a later run without the flag keeps the cap...
    out = json.loads(run_cli("index", str(project), "--json").stdout)
    assert out["skipped"].get("too_large") == 1 and out["parsed"] == 0
    # ...and status says which cap left files out, and how to move it.
    assert "size cap:      2KiB per file (memstrata index --max-file-size SIZE changes it)" in \
        run_cli("status", str(project)).stdout
    # ...and a larger cap brings the file in.
    out = json.loads(run_cli("index", str(project), "--max-file-size", "1MiB", "--json").stdout)
    assert out["parsed"] == 1 and "too_large" not in out["skipped"]
    assert "size cap" not in run_cli("status", str(project)).stdout  # nothing it left out
    bad = run_cli("index", str(project), "--max-file-size", "lots", check=False)
    assert bad.returncode == 2 and "not a size" in bad.stderr


def test_cli_max_file_size_takes_gib_and_refuses_sizes_over_its_limit(project, run_cli):
    """A cap past 256MiB was read as `read(cap + 1)` by every worker (100000000000: a bare
    MemoryError, exit 1), while 1GiB was "not a size"."""
    for too_big in ("100000000000", "3000000000", "1GiB", "2G", "4gib", "268435457", "1T", "1TB"):
        bad = run_cli("index", str(project), "--max-file-size", too_big, check=False)
        assert bad.returncode == 2, bad.stderr
        assert bad.stderr.splitlines()[-1] == (
            f"memstrata index: error: argument --max-file-size: over the limit: '{too_big}' "
            "(at most 256MiB; no source file worth indexing is larger)")
        assert not (project / ".memstrata").exists()
    for bad_size in ("inf", "nan", "1PB", "lots"):
        bad = run_cli("index", str(project), "--max-file-size", bad_size, check=False)
        assert bad.returncode == 2 and f"not a size: '{bad_size}'" in bad.stderr
    for small in ("0", "0k", "-5", "0.5"):
        bad = run_cli("index", str(project), "--max-file-size", small, check=False)
        assert bad.returncode == 2 and f"too small: '{small}'" in bad.stderr, bad.stderr
    assert "at most 256MiB" in " ".join(run_cli("index", "--help").stdout.split())
    out = json.loads(run_cli("index", str(project), "--max-file-size", "0.25GiB", "--json").stdout)
    assert out["parsed"] == len(ALL_FILES)
    store = open_store(project)
    try:
        assert store.get_meta("max_file_bytes") == str(256 * 1024**2)
        # A cap past the limit remembered by an older version is held to the limit, not used.
        store.set_meta("max_file_bytes", "100000000000")
    finally:
        store.close()
    (project / "app/reports.py").write_text("def quarterly(): pass\n")
    out = json.loads(run_cli("index", str(project), "--json").stdout)
    assert out["parsed"] == 1


def test_a_file_that_grows_past_the_size_cap_leaves_index_and_graph(project):
    crypto = project / "app" / "util" / "crypto.py"
    with Workspace.open(project, max_file_bytes=2000, workers=1) as w:
        w.index()
        assert "app/util/crypto.py::hash_password" in w.graph
        crypto.write_text(crypto.read_text() + "\n# " + "x" * 3000 + "\n")
        summary = w.apply_changes(Changes({"app/util/crypto.py"}, set()))
        assert summary.removed_paths == ["app/util/crypto.py"]
        assert "app/util/crypto.py::hash_password" not in w.graph
        assert "app/util/crypto.py" not in ci.file_states(w.store)
        assert w.status().skipped.get("too_large") == 1


def test_a_long_functions_last_lines_are_searchable(project):
    """Words a question shares with a long function are as often at its end as at its start:
    the whole body is in the full-text index (it was cut at 1,200 characters)."""
    filler = "".join(f"    step_{k} = compute_step({k}, payload)\n" for k in range(80))
    (project / "app" / "pipeline.py").write_text(
        "def run_pipeline(payload):\n" + filler + "    return reconcile_ledger_quarterly(step_79)\n")
    with Workspace.open(project, workers=1) as ws:
        ws.index()
        assert len(ci.file_text(ws.store, "app/pipeline.py")) > 3000
        hits = [ws.graph.node_for_db_id(sid) for sid, _ in ci.search_symbols(ws.store, ["quarterly"])]
        assert hits == ["app/pipeline.py::run_pipeline"]


def test_a_run_that_rewrites_most_files_leaves_the_search_merged(tmp_path):
    """Re-deriving every file (an extractor upgrade) deletes and writes every search row again;
    the run then merges the search index into one segment, so searches read no more pages than
    after a fresh index, and find the same."""
    from memstrata.storage import code_index as ci

    from ..conftest import many_small_files

    root = many_small_files(tmp_path / "p", packages=3, files=80, functions=4)
    with Workspace.open(root, workers=1) as ws:
        ws.index()

        def found():  # what a search finds (symbol ids change when files are written again)
            return [(ws.store.execute("SELECT qualname FROM symbols WHERE id = ?", (sid,))[0][0], score)
                    for sid, score in ci.search_symbols(ws.store, ["f1"], limit=20)]

        fresh = found()
        assert len(fresh) == 20
        ws.store.set_meta("extractor", "an older one")
        summary = ws.index()
        assert summary.parsed == 240
        segments = ws.store.execute("SELECT count(DISTINCT segid) FROM symbols_fts_idx")[0][0]
        assert segments == 1
        assert found() == fresh


def test_a_merge_the_disk_has_no_room_for_leaves_the_run_complete(tmp_path, monkeypatch, caplog):
    """Merging writes the search index anew; where the disk cannot take that, the run still ends
    ready, every file indexed, the search unmerged."""
    from memstrata.storage import StoreFull
    from memstrata.storage import code_index as ci

    from ..conftest import many_small_files

    def no_room(conn):
        raise StoreFull("database or disk is full")

    root = many_small_files(tmp_path / "p", packages=3, files=80, functions=2)
    with Workspace.open(root, workers=1) as ws:
        ws.index()
        ws.store.set_meta("extractor", "an older one")
        monkeypatch.setattr(ci, "merge_search_segments", no_room)
        summary = ws.index()
        assert summary.parsed == 240 and ws.store.get_meta("status") == "ready"
        assert "not merged after rewriting 240 files" in caplog.text


@pytest.mark.parametrize("link", ["folder outside", "database", "resident log"])
def test_an_index_folder_that_leads_outside_the_project_is_refused(tmp_path, link):
    """A cloned repository can carry `.memstrata` as a link, or links inside it: nothing is
    created, truncated or read where they point."""
    from memstrata.indexer.project import ProjectError, holds_index

    root, outside = tmp_path / "p", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "app.py").write_text("def main():\n    pass\n")
    (outside / "notes.txt").write_text("precious\n")
    if link == "folder outside":
        (root / ".memstrata").symlink_to(outside, target_is_directory=True)
        reason = "it is a link to a folder outside the project; remove the link"
    else:
        (root / ".memstrata").mkdir()
        name, target = {"database": ("index.db", outside / "new.db"),
                        "resident log": ("daemon.log", outside / "notes.txt")}[link]
        (root / ".memstrata" / name).symlink_to(target)
        reason = f".memstrata/{name} is a link, where MemStrata keeps a file of its own; remove the link"
    for attempt in (lambda: open_store(root), lambda: open_store(root, readonly=True), lambda: holds_index(root)):
        with pytest.raises(ProjectError) as err:
            attempt()
        assert str(err.value) == f"cannot use .memstrata/ in the project: {reason}"
    assert sorted(p.name for p in outside.iterdir()) == ["notes.txt"]
    assert (outside / "notes.txt").read_text() == "precious\n"

    # A link to a folder inside the project keeps the index inside it: allowed.
    if link == "folder outside":
        (root / ".memstrata").unlink()
        (root / "cache").mkdir()
        (root / ".memstrata").symlink_to(root / "cache", target_is_directory=True)
        open_store(root).close()
        assert (root / "cache" / "index.db").is_file()


@pytest.mark.parametrize("in_place, reason", [
    ("file", "a file named .memstrata is in its place; move it away"),
    ("dangling link", ".memstrata is a link to a folder that does not exist; remove the link"),
])
def test_what_stands_where_the_index_folder_goes_is_named(tmp_path, in_place, reason):
    """mkdir's own word for both cases is "File exists", which a person cannot act on."""
    from memstrata.indexer.project import ProjectError

    (tmp_path / "app.py").write_text("def main():\n    pass\n")
    if in_place == "file":
        (tmp_path / ".memstrata").write_text("")
    else:
        (tmp_path / ".memstrata").symlink_to(tmp_path / "gone")
    with pytest.raises(ProjectError) as err:
        open_store(tmp_path)
    assert str(err.value) == f"cannot create .memstrata/ in the project: {reason}"
