"""Killed processes: no torn record file, nothing left locked, the index rebuilds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from memstrata.harness.stormbuffer.codec import parse_record

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


def test_sigkill_during_a_reindex(sbuf):
    sbuf.init()
    ids = [hand_written(sbuf.records, title=f"Bulk {n}", body=f"bulk record number {n} " * 30) for n in range(3000)]
    proc = subprocess.Popen([SBUF, "--project", "reindex"], cwd=sbuf.project, env=sbuf.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.6)
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
