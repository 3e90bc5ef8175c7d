"""Writers of a shared store: ``memstrata watch --store`` keeps it fresh for
readers elsewhere, a re-run parses nothing, writers queue, and neither a
killed writer nor a server restart mid-run leaves a lock or a torn index."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..shared_store_helpers import (
    FIXTURE_NAMES,
    dbname,
    files_without_text,
    make_many_copies,
    pg_cli_env,
    popen,
    project_files,
    sqlite_symbol_counts,
)

NEXT_RUN_DEADLINE = 300  # seconds: a lock left behind would make the next run wait forever
COPIES = 30


@pytest.fixture
def env(cli_env):
    return pg_cli_env(cli_env)


def read(run_cli, env, url, name, *args, check=True):
    """A reader command run outside the checkout (in the test's temporary folder)."""
    return run_cli(*args, "--store", url, "--project-name", name, "--json", env=env, check=check,
                   cwd=Path(env["MEMSTRATA_HOME"]).parent)


def finish(proc: subprocess.Popen, timeout: float = NEXT_RUN_DEADLINE) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{proc.args[:3]} did not finish\nstdout:\n{out}\nstderr:\n{err}")
    return proc.returncode, out, err


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


# -- watch: one writer, readers elsewhere ---------------------------------------------------

def test_watch_keeps_the_shared_index_fresh_for_another_process(project_copy, run_cli, pg_url, env,
                                                                 memstrata_exe, wait_until):
    root = project_copy("python_project")
    name = root.name  # --project-name defaults to the folder name
    watch = popen([memstrata_exe, "watch", str(root), "--store", pg_url], env, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: "watching" in watch.stdout.readline(), timeout=120, message="the watch to start")

        def symbol(sym: str):
            proc = read(run_cli, env, pg_url, name, "symbol", sym, "--body", check=False)
            return json.loads(proc.stdout) if proc.returncode == 0 else None

        assert symbol("rotate_api_token") is None
        service = root / "app" / "auth" / "service.py"
        service.write_text(service.read_text() + "\n\ndef rotate_api_token(user: str) -> str:\n"
                           "    return user[::-1]\n")
        found = wait_until(lambda: symbol("rotate_api_token"), timeout=60, message="the edit to reach the reader")
        assert "return user[::-1]" in found["symbols"][0]["body"]

        (root / "app" / "ledger_export.py").write_text("def export_ledger_rows(rows):\n    return list(rows)\n")
        wait_until(lambda: symbol("export_ledger_rows"), timeout=60, message="the new file to reach the reader")

        (root / "app" / "reports.py").unlink()
        wait_until(lambda: read(run_cli, env, pg_url, name, "outline", "app/reports.py", check=False).returncode,
                   timeout=60, message="the deletion to reach the reader")
        status = json.loads(read(run_cli, env, pg_url, name, "status").stdout)
        assert status["files_indexed"] == 10  # 10, one added, one deleted
        slice_ = json.loads(read(run_cli, env, pg_url, name, "query", "rotate_api_token").stdout)
        assert "def rotate_api_token" in slice_["context"] and "app/reports.py" not in slice_["sources"]
    finally:
        if watch.poll() is None:
            watch.send_signal(signal.SIGTERM)
        code, out, _ = finish(watch, 60)
    assert code == 0 and "stopped" in out

    # Nothing changed since: a re-run parses nothing.
    again = json.loads(run_cli("index", str(root), "--store", pg_url, "--json", env=env).stdout)
    assert (again["parsed"], again["removed"], again["unchanged"]) == (0, 0, 10)


# -- writers queue, and a dead one holds nothing -----------------------------------------------

HOLDER = """
import sys, time
from memstrata.indexer.project import StoreRunLock
from memstrata.storage.postgres import PgStore
store = PgStore(sys.argv[1], sys.argv[2])
StoreRunLock(store).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_second_writer_waits_for_a_live_holder_and_not_for_a_dead_one(project_copy, run_cli, pg_url, env,
                                                                     memstrata_exe):
    root = project_copy("python_project")
    run_cli("index", str(root), "--store", pg_url, env=env)
    holder = popen([sys.executable, "-c", HOLDER, pg_url, root.name], env, stderr=subprocess.DEVNULL)
    waiting = None
    try:
        assert holder.stdout.readline().strip() == "held"
        status = json.loads(read(run_cli, env, pg_url, root.name, "status").stdout)
        assert status["status"] == "ready"  # a finished run stays ready while another holds the lock
        waiting = popen([memstrata_exe, "index", str(root), "--store", pg_url], env, stdout=subprocess.DEVNULL)
        assert "waiting" in waiting.stderr.readline()
        time.sleep(0.5)
        assert waiting.poll() is None  # still waiting for the live holder
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        code, _, err = finish(waiting)
        assert code == 0, err
    finally:
        stop(holder)
        if waiting is not None:
            stop(waiting)


def wait_for_committed_files(cluster, db, name, wait_until, proc) -> None:
    wait_until(lambda: project_files(cluster, db, name) or proc.poll() is not None, timeout=120,
               message="the run's first committed batch")
    assert proc.poll() is None, "the run finished before the fault; make the project larger"


def assert_consistent(cluster, db, name, root) -> dict[str, int]:
    """Every file row present holds all of its symbols and its text (compared with a
    SQLite index of the same checkout, which nothing interrupted)."""
    rows = project_files(cluster, db, name)
    reference = sqlite_symbol_counts(root)
    assert rows and set(rows) <= set(reference)
    torn = {p: (n, reference[p]) for p, n in rows.items() if n != reference[p]}
    assert not torn, f"files whose symbols are partly written: {sorted(torn)[:5]}"
    assert files_without_text(cluster, db, name) == []
    return rows


def test_sigkill_of_a_writer_mid_index_leaves_no_lock(tmp_path, run_cli, pg_url, pg_cluster, env,
                                                      memstrata_exe, wait_until):
    root = make_many_copies(tmp_path, FIXTURE_NAMES, COPIES)
    db, name = dbname(pg_url), root.name
    run_cli("index", str(root), env=env, timeout=NEXT_RUN_DEADLINE)  # the SQLite reference
    first = popen([memstrata_exe, "index", str(root), "--store", pg_url, "--workers", "2"], env,
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_committed_files(pg_cluster, db, name, wait_until, first)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert_consistent(pg_cluster, db, name, root)
    status = json.loads(read(run_cli, env, pg_url, name, "status").stdout)
    assert status["status"] == "stale", status
    assert "another" not in status.get("message", "") and "interrupted" in status["message"]

    second = popen([memstrata_exe, "index", str(root), "--store", pg_url, "--json"], env)
    code, out, err = finish(second)
    assert code == 0, err
    assert "waiting" not in err  # the killed run's lock went with its connection
    summary = json.loads(out)
    status = json.loads(read(run_cli, env, pg_url, name, "status").stdout)
    assert (status["status"], status["files_indexed"]) == ("ready", summary["files"])
    assert assert_consistent(pg_cluster, db, name, root) == sqlite_symbol_counts(root)


def test_two_writers_at_once_queue(tmp_path, run_cli, pg_url, pg_cluster, env, memstrata_exe, wait_until):
    root = make_many_copies(tmp_path, FIXTURE_NAMES, COPIES // 2)
    db, name = dbname(pg_url), root.name
    # Without --json: the summary line, and the waiting notice on stderr.
    first = popen([memstrata_exe, "index", str(root), "--store", pg_url], env)
    second = None
    try:
        wait_for_committed_files(pg_cluster, db, name, wait_until, first)
        second = popen([memstrata_exe, "index", str(root), "--store", pg_url], env)
        code2, out2, err2 = finish(second)
        code1, out1, err1 = finish(first)
    finally:
        stop(first)
        if second is not None:
            stop(second)
    assert (code1, code2) == (0, 0), err1 + err2
    assert "another MemStrata process is writing this index; waiting" in err2
    one, two = (re.search(r"indexed (\d+) files? .*: (\d+) parsed, (\d+) unchanged", out) for out in (out1, out2))
    assert one and two, out1 + out2
    files, parsed, _ = map(int, one.groups())
    # The second ran once the first had finished: everything was already there.
    assert parsed == files and tuple(map(int, two.groups())) == (files, 0, files)


# -- the server restarts mid-index ------------------------------------------------------------

def test_server_restart_mid_index_leaves_a_consistent_index_and_the_next_run_finishes(
        tmp_path, run_cli, pg_url, pg_cluster, env, memstrata_exe, wait_until):
    root = make_many_copies(tmp_path, FIXTURE_NAMES, COPIES)
    db, name = dbname(pg_url), root.name
    run_cli("index", str(root), "--workers", "1", env=env, timeout=NEXT_RUN_DEADLINE)  # the SQLite reference
    run = popen([memstrata_exe, "index", str(root), "--store", pg_url, "--workers", "1"], env,
                stdout=subprocess.DEVNULL)
    try:
        wait_for_committed_files(pg_cluster, db, name, wait_until, run)
        pg_cluster.restart("immediate")
        code, _, err = finish(run)
    finally:
        stop(run)
    if code != 0:  # the run may ride out the restart; if not, it says so in one sentence
        lines = err.strip().splitlines()
        assert code == 2 and "Traceback" not in err and lines[-1].startswith("memstrata: "), err
        assert pg_cluster.password not in err
    assert_consistent(pg_cluster, db, name, root)
    status = json.loads(read(run_cli, env, pg_url, name, "status").stdout)
    assert status["status"] in (("ready",) if code == 0 else ("stale", "error")), status

    run_cli("index", str(root), "--store", pg_url, "--workers", "1", env=env, timeout=NEXT_RUN_DEADLINE)
    status = json.loads(read(run_cli, env, pg_url, name, "status").stdout)
    assert status["status"] == "ready"
    assert assert_consistent(pg_cluster, db, name, root) == sqlite_symbol_counts(root)
    for question in ("AuthService.login and its callers", "how are orders priced", "parse the config"):
        for budget in ("512", "4096"):
            args = ("query", question, "--max-tokens", budget, "--json")
            pg = run_cli(*args, "--store", pg_url, "--project-name", name, env=env).stdout
            assert pg == run_cli(*args, str(root), env=env).stdout, (question, budget)
