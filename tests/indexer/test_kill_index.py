"""``kill -9`` of an index run (only the run, not its process group) never locks the project.

The parse workers are forked children of the run.  They must die with it and
must never hold the index lock, so the next ``memstrata index`` finishes --
the bound below is a generous deadline against a hang, not a timing target.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memstrata.storage import Store

from .test_bad_input import committed_files, make_project

NEXT_RUN_DEADLINE = 120  # seconds; a locked project would wait forever


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pids: set[int]) -> set[int]:
    live = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                    live.add(pid)
        except OSError:
            pass
    return live


def kill_run_only(proc: subprocess.Popen, wait_until) -> set[int]:
    """SIGKILL the run's own pid, as ``kill -9 $p`` does; returns the workers it had."""
    workers = wait_until(lambda: descendants(proc.pid), timeout=60, message="the run's parse workers")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return workers


def assert_workers_exit(workers: set[int], wait_until) -> None:
    wait_until(lambda: not alive(workers), timeout=30,
               message=f"the killed run's workers {sorted(alive(workers))} to exit")


def next_index(root: Path, cli_env, memstrata_exe) -> dict:
    try:
        proc = subprocess.run([memstrata_exe, "index", str(root), "--json"], env=cli_env, capture_output=True,
                              text=True, timeout=NEXT_RUN_DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail("the next memstrata index did not finish: the killed run left the project locked")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def status(root: Path, run_cli) -> dict:
    return json.loads(run_cli("status", str(root), "--json").stdout)


@pytest.mark.timeout(300)
def test_kill_9_of_a_cold_index_leaves_nothing_locked(tmp_path, cli_env, run_cli, wait_until, memstrata_exe):
    n = 2000
    root = tmp_path / "cold"
    make_project(root, n)
    db = root / ".memstrata/index.db"
    proc = subprocess.Popen([memstrata_exe, "index", str(root), "--json", "--workers", "2"], env=cli_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: db.exists() and committed_files(db) > 0, timeout=60,
                   message="the first committed batch")
        assert proc.poll() is None, "the run finished before it could be killed; make the project larger"
        workers = kill_run_only(proc, wait_until)
        assert workers
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert_workers_exit(workers, wait_until)

    st = status(root, run_cli)
    assert st["status"] == "stale" and "interrupted" in st["message"]
    out = next_index(root, cli_env, memstrata_exe)
    assert out["files"] == n
    st = status(root, run_cli)
    assert (st["status"], st["files_indexed"], st["symbols"]) == ("ready", n, 30 * n)
    with Store(db, readonly=True) as store:
        assert store.integrity_ok()


@pytest.mark.timeout(300)
def test_kill_9_of_a_large_incremental_index_leaves_nothing_locked(tmp_path, cli_env, run_cli, wait_until,
                                                                   memstrata_exe):
    n = 2000
    root = tmp_path / "incr"
    make_project(root, n)
    next_index(root, cli_env, memstrata_exe)
    # Touch every module so the catch-up run parses them all again in workers.
    for i, path in enumerate(sorted(root.rglob("mod*.py"))):
        path.write_text(path.read_text() + f"\n\ndef added_{i}():\n    return {i}\n")
    proc = subprocess.Popen([memstrata_exe, "index", str(root), "--workers", "2"], env=cli_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        workers = kill_run_only(proc, wait_until)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert_workers_exit(workers, wait_until)
    out = next_index(root, cli_env, memstrata_exe)
    assert out["files"] == n
    st = status(root, run_cli)
    assert (st["status"], st["files_indexed"], st["symbols"]) == ("ready", n, 31 * n)


@pytest.mark.timeout(300)
def test_kill_9_of_serve_during_its_first_index(tmp_path, cli_env, run_cli, wait_until, memstrata_exe):
    n = 2000
    root = tmp_path / "served"
    make_project(root, n)
    db = root / ".memstrata/index.db"
    proc = subprocess.Popen([memstrata_exe, "serve", "--project", str(root), "--port", "0", "--no-watch"],
                            env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_until(lambda: db.exists() and committed_files(db) > 0, timeout=60,
                   message="serve's first committed batch")
        workers = kill_run_only(proc, wait_until)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert_workers_exit(workers, wait_until)
    out = next_index(root, cli_env, memstrata_exe)
    assert out["files"] == n
    assert status(root, run_cli)["status"] == "ready"


def test_a_live_holder_is_waited_for_and_a_dead_one_is_not(tmp_path, cli_env, memstrata_exe):
    """The lock follows its holder: held while it lives (even stopped), gone the moment it dies."""
    root = tmp_path / "held"
    make_project(root, 3)
    next_index(root, cli_env, memstrata_exe)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from memstrata.indexer.project import WriterLock;"
         "lock = WriterLock(Path(sys.argv[1])); lock.acquire(); print('held', flush=True); time.sleep(600)",
         str(root)], stdout=subprocess.PIPE, text=True, env=cli_env)
    try:
        assert holder.stdout.readline().strip() == "held"
        waiting = subprocess.Popen([memstrata_exe, "index", str(root)], env=cli_env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = waiting.stderr.readline()
        assert "waiting" in line
        time.sleep(0.5)
        assert waiting.poll() is None  # still waiting for the live holder
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        assert waiting.wait(timeout=NEXT_RUN_DEADLINE) == 0
        waiting.stderr.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
