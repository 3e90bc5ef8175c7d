"""An index that cannot be used is no reason to fail (spec 1.3: writes go to the Markdown
only, the index is a disposable projection): agent writes succeed with the index file
unusable, and a process started on a full disk keeps a healthy index as it was and still
answers reads from it or from the Markdown.

The full disk is a small tmpfs mounted for the test (root only), as in
tests/harness/test_disk_faults.py; where the machine cannot mount one the test is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os

import pytest

from ..harness.test_disk_faults import fill, tmpfs
from .conftest import SOURCE, SbufEnv

pytestmark = pytest.mark.timeout(240)


def _fill_up(path) -> None:
    """Take every free block that is left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 4096):
                pass
    finally:
        os.close(fd)


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_agent_writes_do_not_need_the_index(sbuf, session):
    sbuf.init()
    old = sbuf.active()
    index = sbuf.store / "index.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        (sbuf.store / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    index.mkdir()  # nothing SQLite can open

    s = session("--project", "--allow-writes")
    s.initialize()
    fresh = {"title": "Deploy window", "kind": "fact", "body": "Deploys stop at 16:00.\n", "source": SOURCE}
    got = s.envelope("memory_remember", fresh)
    assert got["ok"] and got["result"]["outcome"] == "requires_approval", got
    new_id = got["result"]["record_id"]
    assert sbuf.record_file(new_id).is_file()
    # The duplicate check and the update's look-up read the Markdown.
    again = s.envelope("memory_remember", fresh)
    assert again["result"]["outcome"] == "duplicate_of" and again["result"]["related_id"] == new_id, again
    upd = s.envelope("memory_update", {"id": old, "body": "Releases ship on Wednesdays.\n", "source": SOURCE})
    assert upd["ok"] and upd["result"]["related_id"] == old, upd
    assert s.envelope("memory_get", {"id": new_id})["result"]["status"] == "candidate"

    result = sbuf.remember("Freeze", "No deploys in December.\n")
    assert result["outcome"] == "requires_approval"
    assert index.is_dir()  # left as it was


def test_a_full_disk_keeps_the_index_and_still_serves(tmp_path):
    with tmpfs(tmp_path / "disk", "2m") as disk:
        sbuf = SbufEnv(disk)
        sbuf.init()
        first = sbuf.active("Release marker", "marker: releases ship on Tuesdays\n")
        sbuf.active("Deploy marker", "marker: deploys stop at 16:00\n")
        query = {"query": "marker", "budget": 256}
        healthy = sbuf.result("context", query)
        assert len(healthy["blocks"]) == 2
        index = sbuf.store / "index.sqlite3"
        before = _digest(index)

        filler = fill(disk, leave=12 * 1024)  # room for a record, not for SQLite's shared memory
        try:
            # A process started now: reads answer as before and the index stays as it was.
            assert sbuf.result("context", query)["blocks"] == healthy["blocks"]
            assert _digest(index) == before
            s = sbuf.mcp("--project", "--allow-writes")
            try:
                s.initialize()
                recall = s.envelope("memory_recall", query)
                assert recall["ok"] and recall["result"]["blocks"] == healthy["blocks"], recall
                # A write goes to the Markdown when the record fits.
                got = s.envelope("memory_remember", {"title": "Freeze marker", "kind": "fact",
                                                     "body": "marker: no deploys in December\n",
                                                     "source": SOURCE})
                assert got["ok"] and got["result"]["outcome"] == "requires_approval", got
                new_id = got["result"]["record_id"]
                assert sbuf.record_file(new_id).is_file()
                assert s.envelope("memory_get", {"id": new_id})["result"]["status"] == "candidate"
            finally:
                s.kill()
            assert sbuf.result("get", {"id": new_id})["status"] == "candidate"
            assert _digest(index) == before

            # Explicit index maintenance says it could not write the index, and breaks nothing.
            err = sbuf.fails("--project", "sync")
            assert "Traceback" not in err
            assert _digest(index) == before

            _fill_up(disk / "filler-rest.bin")
            # No room even for a record: the write fails cleanly, reads still work.
            refused = sbuf.error("remember", {"version": 1, "title": "Too late", "kind": "fact",
                                              "body": "nothing fits\n", "source": SOURCE})
            assert refused["code"] == "internal_error", refused
            assert sbuf.result("get", {"id": first})["status"] == "active"
            assert _digest(index) == before
        finally:
            for path in disk.glob("filler*"):
                path.unlink()
        # With space again the index catches up with the record written meanwhile.
        assert sbuf.ok("--project", "sync").startswith("synced 3 record files: 1 added")
        assert sbuf.result("get", {"id": new_id})["status"] == "candidate"
