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


def test_the_proxy_role_never_sends_an_update_it_may_not_make(team_roles, project_copy, pg_cluster, pg_url):
    """serve under the docs' proxy role writes the ledger and nothing else: the background whole-file
    token counts see that the role may not update ``files`` and leave them to the CI role."""
    import types

    from memstrata.compressor.file_counts import count_missing
    from memstrata.storage.postgres import PgStore, schema_name

    ci_url, proxy_url = team_roles
    root = project_copy("python_project")
    assert _run("index", str(root), "--store", ci_url, "--project-name", "shop").returncode == 0
    schema = schema_name("shop")
    proxy_role = urlsplit(proxy_url).username
    with pg_cluster.connect(urlsplit(pg_url).path.lstrip("/")) as conn:
        conn.execute(f"GRANT INSERT, UPDATE ON {schema}.ledger, {schema}.ledger_sessions TO {proxy_role}")
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {proxy_role}")
    store = PgStore(proxy_url, "shop", create=False)
    try:
        assert store.may_update("ledger") and not store.may_update("files")
        writes = []
        real_write = store.write
        store.write = lambda *a, **k: writes.append(1) or real_write(*a, **k)
        assert count_missing(types.SimpleNamespace(store=store)) == 0
        assert writes == []  # nothing sent for the server to refuse (and log)
        store.write = real_write
        with store.write() as c:  # the connection is fine for what the role may do
            c.execute("UPDATE ledger_sessions SET pid = pid WHERE 1 = 0")
    finally:
        store.close()
