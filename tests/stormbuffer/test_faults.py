"""Killed processes: no torn record file, nothing left locked, the index rebuilds."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from memstrata.stormbuffer.codec import parse_record

from .conftest import SBUF, SOURCE, WAIT
from .helpers import hand_written

pytestmark = pytest.mark.timeout(240)


def remember_line(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
        "name": "memory_remember",
        "arguments": {"title": f"Burst {n}", "kind": "fact", "body": f"burst body {n} " * 50, "source": SOURCE}},
    }).encode() + b"\n"


def test_sigkill_during_a_burst_of_writes(sbuf, session):
    sbuf.init()
    s = session("--project", "--allow-writes")
    s.initialize()
    s.send_raw(b"".join(remember_line(n) for n in range(400)))
    answered = 0
    deadline = time.monotonic() + WAIT
    while answered < 25 and time.monotonic() < deadline:
        s.recv()
        answered += 1
    os.kill(s.proc.pid, signal.SIGKILL)
    s.proc.wait(timeout=WAIT)
    assert answered == 25

    files = sbuf.record_files()
    assert len(files) >= answered
    for path in files:  # every record file is whole
        rec = parse_record(path.read_bytes())
        assert rec.status == "candidate" and rec.body.startswith("burst body")
    leftovers = [p for p in sbuf.records.iterdir() if not p.name.endswith(".md")]
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in leftovers)

    # nothing stays locked, reads and writes work at once, and a rebuilt index sees every record
    assert sbuf.remember("After the crash", "written later\n")["outcome"] == "requires_approval"
    assert sbuf.ok("--project", "reindex") == f"reindexed {len(files) + 1} record files (0 invalid)\n"
    listed = sbuf.ok("--project", "list", "--all").splitlines()
    assert len(listed) == len(files) + 1
    assert sbuf.run("--project", "doctor").returncode == 0


def _held_by_another(lock: Path) -> bool:
    """True while another process holds the flock on ``lock`` (ours is let go at once)."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we took
    return False


def test_sigkill_during_a_reindex(sbuf):
    sbuf.init()
    ids = [hand_written(sbuf.records, title=f"Bulk {n}", body=f"bulk record number {n} " * 30) for n in range(3000)]
    lock = sbuf.store / "projection.lock"
    proc = subprocess.Popen([SBUF, "--project", "reindex"], cwd=sbuf.project, env=sbuf.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Killed while the rebuild holds the projection lock (the old index
    # discarded, the records being projected again), not after a fixed delay
    # that a fast machine outruns.
    deadline = time.monotonic() + WAIT
    while proc.poll() is None and not _held_by_another(lock) and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)  # into the projection, not at its first statement
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=WAIT) == -signal.SIGKILL  # it was still at work

    found = sbuf.result("search", {"query": "bulk", "limit": 100})
    assert len(found) == 100
    assert sbuf.result("get", {"id": ids[-1]})["title"] == "Bulk 2999"
    assert sbuf.ok("--project", "sync").startswith("synced 3000 record files")


def test_a_killed_reader_leaves_no_lock(sbuf, session):
    sbuf.init()
    record_id = sbuf.active()
    s = session("--project", "--allow-writes")
    s.initialize()
    assert s.envelope("memory_get", {"id": record_id})["ok"]
    os.kill(s.proc.pid, signal.SIGKILL)
    s.proc.wait(timeout=WAIT)
    assert sbuf.result("archive", {"id": record_id})["status"] == "archived"


def test_an_unreadable_folder_under_records_is_a_clean_failure(sbuf):
    """Its records must not silently drop out of recall, and nobody sees a traceback or a path."""
    from tests.conftest import drop_dac_capabilities

    sbuf.init()
    record_id = sbuf.active()
    locked = sbuf.records / "team"
    locked.mkdir()
    hand_written(locked, title="Locked away")
    locked.chmod(0)
    preexec = drop_dac_capabilities if os.geteuid() == 0 else None
    try:
        if subprocess.run(["ls", str(locked)], preexec_fn=preexec, capture_output=True).returncode == 0:
            pytest.skip("chmod 000 does not deny reads here (cannot drop root's DAC override)")
        for args in (("--project", "list"), ("--project", "doctor"), ("--project", "search", "release")):
            proc = subprocess.run([SBUF, *args], cwd=sbuf.project, env=sbuf.env, capture_output=True,
                                  preexec_fn=preexec, timeout=WAIT)
            err = proc.stderr.decode()
            assert proc.returncode == 1, (args, proc.stdout, err)
            assert err == ("error: the folder records/team/ cannot be read (Permission denied); "
                           "make it readable, or move it out of records/\n"), (args, err)
        proc = subprocess.run([SBUF, "--project", "invoke", "context"], input=b'{"version":1,"query":"release"}',
                              cwd=sbuf.project, env=sbuf.env, capture_output=True, preexec_fn=preexec, timeout=WAIT)
        assert json.loads(proc.stdout)["error"] == {"code": "internal_error", "message": "the store operation failed"}
    finally:
        locked.chmod(0o755)
    assert record_id in sbuf.ok("--project", "list")
