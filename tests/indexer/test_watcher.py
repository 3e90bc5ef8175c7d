"""The watcher keeps storage and the in-memory graph in step with real file changes.

Every test changes real files on disk and polls (bounded, ~10 s) until the
graph and the store reflect the change; nothing asserts how fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time

import pytest

from memstrata.indexer.graph import CodeGraph
from memstrata.indexer.watcher import Changes
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci
from tests.conftest import indexed_workspace, many_small_files

pytestmark = pytest.mark.timeout(90)

LOGIN = "app/auth/service.py::AuthService.login"


@pytest.fixture
def project(project_copy):
    return project_copy("python_project")


@pytest.fixture
def ws(project):
    ws = Workspace.open(project, workers=1)
    ws.index()
    ws.graph  # built now, so the watcher refreshes it incrementally
    ws.summaries = []
    ws.listeners.append(ws.summaries.append)
    ws.start_watching(debounce=0.05)
    try:
        yield ws
    finally:
        ws.close()


def in_store(ws, path: str, qualname: str | None = None) -> bool:
    if qualname is None:
        return path in ci.file_paths(ws.store)
    return bool(ws.store.execute(
        "SELECT 1 FROM symbols s JOIN files f ON f.id = s.file_id WHERE f.path = ? AND s.qualname = ?",
        (path, qualname)))


def in_graph(ws, path: str, qualname: str | None = None) -> bool:
    return (f"{path}::{qualname}" if qualname else path) in ws.graph


def present(ws, path, qualname=None) -> bool:
    return in_store(ws, path, qualname) and in_graph(ws, path, qualname)


def absent(ws, path, qualname=None) -> bool:
    return not in_store(ws, path, qualname) and not in_graph(ws, path, qualname)


def settle(ws, wait_until) -> None:
    wait_until(lambda: not ws._watcher.pending, message="the watcher to go idle")


def assert_graph_matches_store(ws) -> None:
    """The incrementally kept graph has exactly the edges (and weights) of a fresh load."""
    with ws.lock:
        mine = {(u, v, k, w) for u, v, k, w in ws.graph.g.edges(keys=True, data="weight")}
    fresh = {(u, v, k, w) for u, v, k, w in CodeGraph.load(ws.store).g.edges(keys=True, data="weight")}
    assert mine == fresh, {"only incremental": sorted(mine - fresh), "only fresh": sorted(fresh - mine)}


def test_an_index_deleted_under_the_watcher_is_said_not_written_to(ws, project, wait_until):
    """`rm -rf .memstrata` while a watcher runs: its writes would go to a file nobody reads, so
    it writes nothing, and the status says to restart (a new `memstrata index` builds another)."""
    shutil.rmtree(project / ".memstrata")
    (project / "app/after_delete.py").write_text("def made_after_the_delete():\n    return 1\n")
    wait_until(lambda: ws.quick_status() == "error", message="the status to tell")
    st = ws.status()
    assert st.status == "error" and "deleted or replaced" in st.message and "restart" in st.message
    settle(ws, wait_until)
    assert not in_graph(ws, "app/after_delete.py")


def test_create(ws, project, wait_until):
    (project / "app/audit_log.py").write_text(
        "from app.auth.service import AuthService\n\n\n"
        "def audited_login(user, pw):\n    return AuthService().login(user, pw)\n")
    wait_until(lambda: present(ws, "app/audit_log.py", "audited_login"), message="the new file's symbols")
    assert "app/audit_log.py::audited_login" in ws.graph.callers(LOGIN)
    settle(ws, wait_until)
    assert_graph_matches_store(ws)


def test_modify(ws, project, wait_until):
    crypto = project / "app/util/crypto.py"
    crypto.write_text(crypto.read_text().replace("def constant_time_eq(", "def safe_eq("))
    wait_until(lambda: present(ws, "app/util/crypto.py", "safe_eq")
               and absent(ws, "app/util/crypto.py", "constant_time_eq"), message="the renamed function")
    # login still calls constant_time_eq, which no longer exists anywhere.
    assert "app/util/crypto.py::constant_time_eq" not in ws.graph.callees(LOGIN)
    assert "app/util/crypto.py::hash_password" in ws.graph.callees(LOGIN)
    settle(ws, wait_until)
    assert_graph_matches_store(ws)


def test_delete(ws, project, wait_until):
    (project / "app/session.py").unlink()
    wait_until(lambda: absent(ws, "app/session.py"), message="the deleted file to go")
    assert absent(ws, "app/session.py", "SessionMiddleware")
    assert "app/session.py::SessionMiddleware.__call__" not in ws.graph.callers(LOGIN)
    settle(ws, wait_until)
    assert_graph_matches_store(ws)


def test_move(ws, project, wait_until):
    os.rename(project / "app/reports.py", project / "app/reporting.py")
    wait_until(lambda: absent(ws, "app/reports.py") and present(ws, "app/reporting.py", "ReportFormatter.render"),
               message="the moved file under its new name")
    assert ws.graph.callees("app/reporting.py::monthly_report") == [
        "app/reporting.py::ReportFormatter", "app/reporting.py::ReportFormatter.render"]


def test_editor_save_write_temp_then_rename(ws, project, wait_until):
    crypto = project / "app/util/crypto.py"
    tmp = project / "app/util/crypto.py.tmp"
    tmp.write_text(crypto.read_text() + "\n\ndef pepper(value: str) -> str:\n    return value + 'p'\n")
    os.replace(tmp, crypto)
    wait_until(lambda: present(ws, "app/util/crypto.py", "pepper"), message="the saved content")
    assert present(ws, "app/util/crypto.py", "hash_password")
    settle(ws, wait_until)
    assert not any(p.endswith(".tmp") for p in ci.file_paths(ws.store))
    # Vim-style: move the original away, write a new file, delete the backup.
    backup = project / "app/util/crypto.py~"
    os.rename(crypto, backup)
    crypto.write_text(backup.read_text() + "\n\ndef salt_of() -> bytes:\n    return SALT\n")
    backup.unlink()
    wait_until(lambda: present(ws, "app/util/crypto.py", "salt_of") and present(ws, "app/util/crypto.py", "pepper"),
               message="the second save")
    settle(ws, wait_until)
    assert_graph_matches_store(ws)


def test_burst_of_200_files_is_applied_in_few_batches(ws, project, wait_until):
    for i in range(200):  # like a git checkout writing into existing folders
        (project / "app" / f"gen_{i:03d}.py").write_text(f"def generated_{i}():\n    return {i}\n")
    wait_until(lambda: all(in_store(ws, f"app/gen_{i:03d}.py", f"generated_{i}") for i in range(200)),
               timeout=30, message="all 200 files in the store")
    settle(ws, wait_until)
    batches = [s for s in ws.summaries if s.parsed]
    assert sum(s.parsed for s in batches) == 200  # each file parsed once
    assert len(batches) <= 10, [s.parsed for s in batches]
    assert all(f"app/gen_{i:03d}.py::generated_{i}" in ws.graph for i in range(200))
    assert_graph_matches_store(ws)


def test_directory_created_with_files_and_deleted(ws, project, tmp_path, wait_until):
    (project / "app/plugins/inner").mkdir(parents=True)
    (project / "app/plugins/__init__.py").write_text("")
    (project / "app/plugins/inner/hooks.py").write_text("def on_login():\n    pass\n")
    wait_until(lambda: present(ws, "app/plugins/inner/hooks.py", "on_login") and present(ws, "app/plugins/__init__.py"),
               message="files of a new directory")
    # A whole tree moved in from outside the project arrives as one directory event.
    outside = tmp_path / "incoming/extras"
    outside.mkdir(parents=True)
    (outside / "one.py").write_text("def extra_one(): pass\n")
    (outside / "deeper").mkdir()
    (outside / "deeper/two.py").write_text("def extra_two(): pass\n")
    shutil.move(str(outside), str(project / "app/extras"))
    wait_until(lambda: present(ws, "app/extras/one.py", "extra_one") and present(ws, "app/extras/deeper/two.py", "extra_two"),
               message="a directory moved into the project")

    shutil.rmtree(project / "app/util")
    wait_until(lambda: absent(ws, "app/util/crypto.py") and absent(ws, "app/util/__init__.py"),
               message="files of a deleted directory to go")
    assert not any(c.startswith("app/util/") for c in ws.graph.callees(LOGIN))
    shutil.move(str(project / "app/extras"), str(tmp_path / "gone_extras"))
    wait_until(lambda: absent(ws, "app/extras/one.py") and absent(ws, "app/extras/deeper/two.py"),
               message="a directory moved out of the project")
    settle(ws, wait_until)
    assert_graph_matches_store(ws)


def test_gitignore_change_re_evaluates_ignores(ws, project, wait_until):
    gitignore = project / ".gitignore"
    gitignore.write_text("app/reports.py\n")
    wait_until(lambda: absent(ws, "app/reports.py"), message="the newly ignored file to leave the index")
    assert ws.store.execute("SELECT reason FROM skipped WHERE path = 'app/reports.py'") == [("gitignored",)]
    # While ignored, edits to it are not indexed.
    (project / "app/reports.py").write_text("def ignored_edit(): pass\n")
    (project / "app/visible.py").write_text("def visible(): pass\n")
    wait_until(lambda: present(ws, "app/visible.py", "visible"), message="an unignored file")
    assert absent(ws, "app/reports.py")
    gitignore.write_text("# nothing ignored\n")
    wait_until(lambda: present(ws, "app/reports.py", "ignored_edit"), message="the unignored file to return")
    settle(ws, wait_until)
    assert_graph_matches_store(ws)


def test_git_info_exclude_change_re_evaluates_ignores(ws, project, wait_until):
    """The repository's own ignore rules (.git/info/exclude) are watched like a .gitignore."""
    exclude = project / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text("app/reports.py\n")
    wait_until(lambda: absent(ws, "app/reports.py"), message="the newly excluded file to leave the index")
    exclude.write_text("# nothing excluded\n")
    wait_until(lambda: not absent(ws, "app/reports.py"), message="the file to return")
    settle(ws, wait_until)
    assert_graph_matches_store(ws)


def test_events_inside_the_index_folder_never_trigger_updates(ws, project, wait_until):
    # Our own commits write .memstrata/index.db; one edit must lead to exactly
    # one update and then silence, not a loop.
    (project / "app/reports.py").write_text("def only_change(): pass\n")
    wait_until(lambda: present(ws, "app/reports.py", "only_change"), message="the edit")
    settle(ws, wait_until)
    count = len(ws.summaries)
    (project / ".memstrata/scratch.py").write_text("def not_indexed(): pass\n")
    (project / ".memstrata/sub").mkdir()
    (project / ".memstrata/sub/x.py").write_text("def nor_this(): pass\n")
    ws.store.set_meta("test_marker", "1")  # a write to index.db from outside the watcher
    time.sleep(1.0)  # a negative check: give a wrong update time to happen
    assert not ws._watcher.pending
    assert len(ws.summaries) == count
    assert not any(p.startswith(".memstrata") for p in ci.file_paths(ws.store))
    assert sum(s.parsed for s in ws.summaries) == 1


def test_status_while_watching(ws, project, wait_until):
    settle(ws, wait_until)
    assert ws.status().status == "ready"
    (project / "app/new.py").write_text("def new(): pass\n")
    wait_until(lambda: present(ws, "app/new.py", "new"), message="the new file")
    settle(ws, wait_until)
    st = ws.status()
    assert (st.status, st.files_indexed) == ("ready", 11)


# -- `memstrata watch` as a process ---------------------------------------------------


def _reader(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def test_memstrata_watch_subprocess(project, tmp_path, run_cli, cli_env, memstrata_exe, wait_until):
    stderr = open(tmp_path / "watch.stderr", "w")
    proc = subprocess.Popen([memstrata_exe, "watch", str(project), "--debounce", "0.05"], env=cli_env,
                            stdout=subprocess.PIPE, stderr=stderr, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    eof = threading.Event()

    def saw(prefix: str) -> bool:
        while True:
            try:
                line = lines.get_nowait()
            except queue.Empty:
                break
            if line is None:
                eof.set()
                break
            seen.append(line)
        found = any(s.startswith(prefix) for s in seen)
        if not found and eof.is_set() and proc.poll() not in (None, 0):
            raise AssertionError(f"memstrata watch exited {proc.returncode}: {seen}")
        return found

    try:
        wait_until(lambda: saw("watching "), timeout=30, message="memstrata watch to start")
        assert any(s.startswith("indexed 10 files") for s in seen), seen
        (project / "app/probe.py").write_text(
            "from app.auth.service import AuthService\n\n\n"
            "def watch_probe_login(user):\n    return AuthService().login(user, 'pw')\n")
        wait_until(lambda: saw("1 updated in "), message="the watcher to report the edit")

        # Other processes see the change: status reads the store, query builds a slice from it.
        status = json.loads(run_cli("status", str(project), "--json").stdout)
        assert (status["status"], status["files_indexed"]) == ("ready", 11)
        query = json.loads(run_cli("query", "watch_probe_login", "--project", str(project), "--json").stdout)
        assert "def watch_probe_login" in query["context"]
        assert any(s.startswith("app/probe.py") for s in query["sources"]), query["sources"]

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        wait_until(lambda: saw("stopped") and eof.is_set(), message="'stopped' and the end of the output")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr.close()
    assert seen[-1] == "stopped", seen


@pytest.mark.timeout(300)  # two index runs of 8,000 files: its own bounds (60 s + 120 s) exceed the module's
def test_sigterm_stops_memstrata_watch_during_its_first_index(tmp_path, run_cli, cli_env, memstrata_exe):
    """A first index of a large project takes minutes: SIGTERM stops it as Ctrl-C does, and
    the next run finishes the job."""
    root = many_small_files(tmp_path / "big", packages=80)
    proc = subprocess.Popen([memstrata_exe, "watch", str(root)], env=cli_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # Signalled once the first index is under way (its first progress line, 8,000 files: many
    # seconds on two cores), not after a fixed delay: a loaded machine can take longer than any
    # delay to start the interpreter, and a SIGTERM that lands before `watch` handles it kills it.
    first: list[str] = []
    while not any(line.startswith("indexing: ") for line in first):
        line = proc.stderr.readline()
        assert line, f"memstrata watch ended before its first index got under way: {first}"
        first.append(line)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    err = "".join(first) + err
    assert proc.returncode == 0, err
    assert "watching" not in out and out.strip().endswith("stopped"), out
    assert "Traceback" not in err, err
    done = run_cli("index", str(root), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["files"] == 8000, done.stderr


@contextlib.contextmanager
def watching(project, cli_env, memstrata_exe):
    """A `memstrata watch` subprocess, up and watching; killed at the end if still running."""
    proc = subprocess.Popen([memstrata_exe, "watch", str(project), "--debounce", "0.05"], env=cli_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("indexed")
        assert proc.stdout.readline().startswith("watching ")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_memstrata_watch_ends_when_its_index_is_deleted(project, tmp_path, cli_env, memstrata_exe):
    """`rm -rf .memstrata` under a watcher: nothing it would write reaches an index anyone reads.
    It says so once and ends (exit 1) instead of watching on for nothing, and leaves no folder
    behind holding only a graph snapshot."""
    with watching(project, cli_env, memstrata_exe) as proc:
        shutil.rmtree(project / ".memstrata")
        (project / "app/after.py").write_text("def after_delete():\n    return 1\n")
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert "the index was deleted or replaced while watching" in err and "Traceback" not in err, err
    assert "the index file was deleted or replaced" not in err, err  # said once, in the command's words
    assert not (project / ".memstrata" / "graph.snapshot").exists()


def test_memstrata_watch_says_so_when_its_project_folder_moves(project, tmp_path, cli_env, memstrata_exe):
    with watching(project, cli_env, memstrata_exe) as proc:
        project.rename(tmp_path / "moved")
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert "the project folder was moved or deleted while watching" in err and "Traceback" not in err, err
    assert (tmp_path / "moved" / ".memstrata" / "index.db").exists()  # nothing deleted


def test_status_elsewhere_says_indexing_while_a_watcher_catches_up(project, tmp_path, cli_env, memstrata_exe, run_cli):
    """Files changed under a running `memstrata watch` that has not applied them yet are being
    indexed, not stale; once no watcher runs (killed), they are stale again."""
    with watching(project, cli_env, memstrata_exe) as proc:
        proc.send_signal(signal.SIGSTOP)  # it cannot apply what changes now
        (project / "app/late.py").write_text("def late():\n    return 1\n")
        status = json.loads(run_cli("status", str(project), "--json").stdout)
        assert status["status"] == "indexing", status
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        status = json.loads(run_cli("status", str(project), "--json").stdout)
        assert status["status"] == "stale", status


def test_last_indexed_moves_when_a_watcher_batch_changes_the_index(tmp_path):
    # index_status's last_indexed is when the index last took in the project's changes: a
    # watcher's batch that re-parsed or removed a file moves it, one that changed nothing does not.
    with indexed_workspace(tmp_path / "p", {"a.py": "def a():\n    return 1\n"}) as ws:
        ws.store.set_meta("last_indexed", "2000-01-01T00:00:00+00:00")
        ws.apply_changes(Changes({"a.py"}, set()))   # the file did not change
        assert ws.status().last_indexed == "2000-01-01T00:00:00+00:00"
        (ws.root / "a.py").write_text("def a():\n    return 2\n\n\ndef b():\n    return 3\n")
        ws.apply_changes(Changes({"a.py"}, set()))
        assert ws.status().last_indexed > "2000-01-01T00:00:00+00:00"
