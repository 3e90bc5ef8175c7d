"""The private PostgreSQL server the PostgreSQL-backend tests run against."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.pg_cluster import PgCluster, _alive, find_binaries, reap_stale_clusters

REPO = Path(__file__).resolve().parents[2]


def _dbname(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


@pytest.fixture
def no_stored_password(monkeypatch, tmp_path):
    """libpq must not find a password anywhere but in the URL under test."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no_pgpass"))


def test_fresh_database_takes_a_table_over_tcp(pg_url):
    import psycopg

    with psycopg.connect(pg_url) as conn:
        user_tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchone()[0]
        assert user_tables == 0
        assert conn.execute("SELECT host(inet_server_addr())").fetchone()[0] == "127.0.0.1"
        assert conn.execute("SHOW max_connections").fetchone()[0] == "200"
        conn.execute("CREATE TABLE files (path text PRIMARY KEY, body text)")
        conn.execute("INSERT INTO files VALUES (%s, %s)", ("a.py", "def ä(): pass"))
        conn.commit()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT body FROM files").fetchall() == [("def ä(): pass",)]


def test_each_database_starts_empty(pg_cluster):
    import psycopg

    first, second = pg_cluster.create_database(), pg_cluster.create_database()
    assert first != second
    with psycopg.connect(pg_cluster.url(first), autocommit=True) as conn:
        conn.execute("CREATE TABLE only_here (x int)")
    with psycopg.connect(pg_cluster.url(second)) as conn:
        assert conn.execute("SELECT to_regclass('only_here')").fetchone()[0] is None
    for name in (first, second):
        pg_cluster.drop_database(name)


@pytest.mark.usefixtures("no_stored_password")
@pytest.mark.parametrize("password", ["wrong-password", False])
def test_tcp_refuses_a_wrong_or_missing_password(pg_cluster, pg_url, password):
    import psycopg

    url = pg_cluster.url(_dbname(pg_url), password=password)
    with pytest.raises(psycopg.OperationalError) as err:
        psycopg.connect(url, connect_timeout=10).close()
    assert "password" in str(err.value)


def test_socket_url_connects_without_a_password(pg_cluster, pg_url, no_stored_password):
    import psycopg

    url = pg_cluster.socket_url(_dbname(pg_url))
    assert "@" not in url and pg_cluster.password not in url
    with psycopg.connect(url) as conn:
        # A Unix-socket connection has no server address.
        assert conn.execute("SELECT inet_server_addr(), current_user").fetchone() == (None, "memstrata_test")
    assert stat.S_ISSOCK(os.stat(pg_cluster.socket_dir / f".s.PGSQL.{pg_cluster.port}").st_mode)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_restart_keeps_committed_data(pg_cluster, pg_url, mode):
    import psycopg

    port = pg_cluster.port
    old_pid = pg_cluster.pid
    held = psycopg.connect(pg_url, autocommit=True)
    held.execute("CREATE TABLE kept (n int)")
    held.execute("INSERT INTO kept SELECT generate_series(1, 1000)")
    pg_cluster.restart(mode)
    assert pg_cluster.running and pg_cluster.port == port and pg_cluster.pid != old_pid
    # The connection from before the restart is dead; a new one sees the rows.
    with pytest.raises(psycopg.OperationalError):
        held.execute("SELECT 1")
    held.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*), sum(n) FROM kept").fetchone() == (1000, 500500)


def test_kill_backends_drops_other_connections(pg_cluster, pg_url):
    import psycopg

    victims = [psycopg.connect(pg_url, autocommit=True) for _ in range(2)]
    for conn in victims:
        conn.execute("SELECT 1")
    assert pg_cluster.kill_backends(_dbname(pg_url)) == 2
    for conn in victims:
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
        conn.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_server_runs_unprivileged(pg_cluster):
    uid = next(int(line.split()[1]) for line in Path(f"/proc/{pg_cluster.pid}/status").read_text().splitlines()
               if line.startswith("Uid:"))
    assert uid != 0
    if os.geteuid() != 0:
        assert uid == os.geteuid()


def test_stop_leaves_no_process_and_no_folder(pg_cluster):
    cluster = PgCluster().start()
    pid, folder = cluster.pid, cluster.folder
    assert _alive(pid) and folder.is_dir()
    cluster.stop()
    assert not _alive(pid)
    assert not folder.exists()
    cluster.stop()  # twice is harmless


def _server_of_killed_child(script: str) -> tuple[int, Path]:
    """Run ``script`` (which starts a cluster and prints its pid and folder),
    then SIGKILL it: the (pid, folder) of the server it left behind."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        pid_text, folder_text = child.stdout.readline().split()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return int(pid_text), Path(folder_text)


def test_killed_test_process_leaves_no_server(pg_cluster, wait_until):
    """A test run killed outright: its server shuts down by itself and the next
    session's start removes the folder."""
    script = ("import sys, time\n"
              "from tests.pg_cluster import PgCluster\n"
              "c = PgCluster().start()\n"
              "print(c.pid, c.folder, flush=True)\n"
              "time.sleep(120)\n")
    pid, folder = _server_of_killed_child(script)
    wait_until(lambda: not _alive(pid), timeout=60, message="the orphaned server to shut down")
    # Give init a moment to reap the exited orphan (not asserted: some
    # container inits never reap, and a zombie holds no port or file).
    for _ in range(250):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.02)
    # (Another session starting now may reap it first: either way it must go.)
    reap_stale_clusters(folder.parent)
    assert not folder.exists()
    # The session's own cluster belongs to a live process: never reaped.
    assert pg_cluster.folder.is_dir() and pg_cluster.running


def test_next_session_stops_a_server_its_dead_owner_left_running(pg_cluster, wait_until):
    """A server started from a worker thread has no parent-death signal: when its
    test process is killed it keeps running until the next session's start reaps it."""
    script = ("import threading, time\n"
              "from tests.pg_cluster import PgCluster\n"
              "t = threading.Thread(target=lambda: print(*(lambda c: (c.pid, c.folder))(PgCluster().start()),"
              " flush=True))\n"
              "t.start(); t.join(); time.sleep(120)\n")
    pid, folder = _server_of_killed_child(script)
    try:
        assert _alive(pid), "the orphaned server should still run until reaped"
        reap_stale_clusters(folder.parent)
        assert not folder.exists()
        wait_until(lambda: not _alive(pid), timeout=60, message="the reaped server to exit")
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _fake_server(bindir: Path) -> None:
    bindir.mkdir(parents=True)
    for name in ("initdb", "postgres"):
        (bindir / name).write_text("#!/bin/sh\n")
        (bindir / name).chmod(0o755)


def test_find_binaries_prefers_the_newest_versioned_folder(tmp_path):
    for version in ("9.6", "15", "10"):
        _fake_server(tmp_path / version / "bin")
    found, why = find_binaries(search_path=str(tmp_path / "empty"), versioned=str(tmp_path / "*" / "bin"))
    assert why == ""
    assert found.initdb == tmp_path / "15" / "bin" / "initdb"
    assert found.postgres == tmp_path / "15" / "bin" / "postgres"


def test_find_binaries_says_what_is_missing_and_how_to_install(tmp_path):
    (tmp_path / "onpath").mkdir()
    (tmp_path / "onpath" / "postgres").write_text("#!/bin/sh\n")
    (tmp_path / "onpath" / "postgres").chmod(0o755)
    found, why = find_binaries(search_path=str(tmp_path / "onpath"), versioned=str(tmp_path / "*" / "bin"))
    assert found is None
    assert "initdb" in why and "postgres not" not in why
    assert "apt-get install postgresql" in why
