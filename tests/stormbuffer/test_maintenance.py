"""``sbuf forget --destroy``, ``sbuf watch`` and ``sbuf gc`` as real processes (spec section 5)."""

from __future__ import annotations

import fcntl
import os
import pty
import queue
import select
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from .conftest import SBUF, WAIT
from .helpers import hand_written, snapshot

pytestmark = pytest.mark.timeout(180)


def projected_ids(index: Path) -> set[str]:
    """The record ids in the projection file itself (not through a command, which would sync)."""
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM sbuf_records")}
    finally:
        conn.close()


# -- forget -------------------------------------------------------------------------


def test_forget_needs_destroy_and_yes_without_a_terminal(sbuf):
    sbuf.init()
    record_id = sbuf.active()
    path = sbuf.record_file(record_id)
    assert sbuf.fails("--project", "forget", record_id) == \
        "error: forget requires --destroy for permanent deletion\n"
    proc = sbuf.run("--project", "forget", record_id, "--yes")
    assert proc.returncode == 2 and b"--yes requires --destroy" in proc.stderr
    # stdin, stdout and stderr are pipes here: no person can be asked
    assert sbuf.fails("--project", "forget", record_id, "--destroy", input="y\n") == \
        "error: noninteractive deletion requires --yes\n"
    assert path.exists()
    assert sbuf.ok("--project", "forget", record_id, "--destroy", "--yes") == f"Forgot {record_id}\n"
    assert not path.exists()
    assert sbuf.error("get", {"version": 1, "id": record_id})["code"] == "not_found"
    assert sbuf.ok("--project", "list", "--all") == ""
    assert sbuf.fails("--project", "forget", record_id, "--destroy", "--yes") == \
        f"error: record {record_id} was not found\n"
    assert "is not a record identifier" in sbuf.fails("--project", "forget", "nope", "--destroy", "--yes")


def test_forget_deletes_any_status_in_the_selected_store_only(sbuf):
    sbuf.init()
    candidate = sbuf.remember()["record_id"]
    assert sbuf.ok("init").startswith("Initialized global store")
    glob = hand_written(sbuf.global_store / "records", scope="global", title="Global note")
    nested = sbuf.records / "team"
    nested.mkdir()
    filed = hand_written(nested, title="Filed below", name="renamed.md")
    # the global record is readable from the project view, but not deletable from it
    assert sbuf.fails("--project", "forget", glob, "--destroy", "--yes") == f"error: record {glob} was not found\n"
    assert sbuf.ok("--project", "forget", candidate, "--destroy", "--yes") == f"Forgot {candidate}\n"
    assert sbuf.ok("--project", "forget", filed, "--destroy", "--yes") == f"Forgot {filed}\n"
    assert not (nested / "renamed.md").exists()
    assert sbuf.ok("forget", glob, "--destroy", "--yes") == f"Forgot {glob}\n"
    assert sbuf.record_files() == [] and sbuf.record_files(sbuf.global_store) == []


def test_forget_on_an_uninitialized_store(sbuf):
    err = sbuf.fails("--project", "forget", "01a23394-e02b-73d6-b342-45e40628f4b6", "--destroy", "--yes")
    assert "not initialized" in err
    assert not sbuf.store.exists()


def _run_in_pty(sbuf, args: list[str], answer: bytes) -> tuple[int, str]:
    """Run sbuf with a pseudo-terminal as stdin, stdout and stderr; answer the prompt."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([SBUF, *args], cwd=sbuf.project, env=sbuf.env, stdin=follower, stdout=follower,
                            stderr=follower, close_fds=True)
    os.close(follower)
    seen = b""
    answered = False
    deadline = time.monotonic() + WAIT
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and b"[y/N] " in seen:
                os.write(leader, answer)
                answered = True
            if proc.poll() is not None and not ready:
                break
        code = proc.wait(timeout=WAIT)
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    return code, seen.decode().replace("\r\n", "\n")


@pytest.mark.parametrize("answer, deleted", [(b"n\n", False), (b"\n", False), (b"YES\n", True), (b"y\n", True)])
def test_forget_asks_a_person_at_a_terminal(sbuf, answer, deleted):
    sbuf.init()
    record_id = sbuf.active(title="Release constraint")
    code, text = _run_in_pty(sbuf, ["--project", "forget", record_id, "--destroy"], answer)
    assert f"Permanently delete Release constraint ({record_id})? [y/N] " in text
    assert "Traceback" not in text
    if deleted:
        assert code == 0 and f"Forgot {record_id}\n" in text
        assert not sbuf.record_file(record_id).exists()
    else:
        assert code == 1 and "error: deletion cancelled\n" in text
        assert sbuf.record_file(record_id).exists()


# -- watch --------------------------------------------------------------------------


def test_watch_once_projects_the_markdown(sbuf):
    assert "not initialized" in sbuf.fails("--project", "watch", "--once")
    sbuf.init()
    first = hand_written(sbuf.records, title="Written by hand")
    out = sbuf.ok("--project", "watch", "--once")
    assert out == "synced: 1 added, 0 updated, 0 removed\nWatch cycles: 1\n"
    assert projected_ids(sbuf.store / "index.sqlite3") == {first}
    assert sbuf.ok("--project", "watch", "--once", "--interval-ms", "0") == "Watch cycles: 1\n"
    (sbuf.records / "broken.md").write_text("not a record\n")
    proc = sbuf.run("--project", "watch", "--once")
    # the file is projected (as invalid) and reported; reads refuse the store until it is fixed
    assert proc.returncode == 1 and proc.stdout == b"synced: 1 added, 0 updated, 0 removed\nWatch cycles: 1\n"
    err = proc.stderr.decode()
    assert err.startswith("error: invalid canonical record records/broken.md: ") and str(sbuf.root) not in err
    proc = sbuf.run("--project", "watch", "--interval-ms", "-5")
    assert proc.returncode == 2 and b"cannot be negative" in proc.stderr


class Watcher:
    """``sbuf watch`` running in the background; its output lines arrive on queues."""

    def __init__(self, sbuf, *args: str):
        self.proc = subprocess.Popen([SBUF, "--project", "watch", *args], cwd=sbuf.project, env=sbuf.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out: queue.Queue = queue.Queue()
        self.err: queue.Queue = queue.Queue()
        for stream, q in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._pump, args=(stream, q), daemon=True).start()

    @staticmethod
    def _pump(stream, q: queue.Queue) -> None:
        for line in stream:
            q.put(line.decode())
        q.put(None)

    def expect(self, q: queue.Queue, text: str) -> None:
        line = q.get(timeout=WAIT)
        assert line == text, line

    def stop(self, sig: int) -> tuple[int, list[str]]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=WAIT)
        rest = []
        while (line := self.out.get(timeout=WAIT)) is not None:
            rest.append(line)
        return code, rest


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_watch_follows_changes_until_stopped(sbuf, sig):
    sbuf.init()
    first = hand_written(sbuf.records, title="First")
    index = sbuf.store / "index.sqlite3"
    w = Watcher(sbuf, "--interval-ms", "50")
    try:
        w.expect(w.out, "synced: 1 added, 0 updated, 0 removed\n")
        second = hand_written(sbuf.records, title="Second")
        w.expect(w.out, "synced: 1 added, 0 updated, 0 removed\n")
        assert projected_ids(index) == {first, second}
        path = sbuf.record_file(second)
        path.write_text(path.read_text().replace('title = "Second"', 'title = "Second, edited"'))
        w.expect(w.out, "synced: 0 added, 1 updated, 0 removed\n")
        path.unlink()
        w.expect(w.out, "synced: 0 added, 0 updated, 1 removed\n")
        # The index deleted under the watcher is rebuilt from the Markdown in one
        # cycle: both changes land while it is stopped, so the next cycle sees the
        # record files the change feed never reported as well as the new one.
        w.proc.send_signal(signal.SIGSTOP)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{index}{suffix}").unlink(missing_ok=True)
        third = hand_written(sbuf.records, title="Third")
        w.proc.send_signal(signal.SIGCONT)
        w.expect(w.out, "synced: 2 added, 0 updated, 0 removed\n")
        assert projected_ids(index) == {first, third}
        bad = sbuf.records / "bad.md"
        bad.write_text("+++\nnot toml\n")
        w.expect(w.out, "synced: 1 added, 0 updated, 0 removed\n")
        line = w.err.get(timeout=WAIT)
        assert line.startswith("error: invalid canonical record records/bad.md: ") and str(sbuf.root) not in line
        if sig == signal.SIGTERM:
            bad.unlink()
            w.expect(w.out, "synced: 0 added, 0 updated, 1 removed\n")
    finally:
        code, rest = w.stop(sig)
    assert rest[-1].startswith("Watch cycles: ") and int(rest[-1].split(": ")[1]) >= 6
    assert w.err.get(timeout=WAIT) is None  # the invalid file was reported once, and nothing else
    # exit 1 while a file is invalid; 0 once it was fixed
    assert code == (1 if sig == signal.SIGINT else 0)


# -- gc -----------------------------------------------------------------------------


def test_gc_removes_only_what_the_markdown_rebuilds(sbuf):
    assert "not initialized" in sbuf.fails("--project", "gc")
    sbuf.init()
    record_id = sbuf.active()
    index = sbuf.store / "index.sqlite3"
    assert index.exists()
    leftovers = [sbuf.records / f".{record_id}.md.4242.1700000000000000000.tmp", sbuf.store / ".store.toml.7.8.tmp"]
    leftovers[0].write_bytes(b"half a record")
    leftovers[1].write_bytes(b"")
    keep = sbuf.records / "notes.tmp"  # not a temp file sbuf writes: someone else's
    keep.write_bytes(b"mine")
    canonical = {k: v for k, v in snapshot(sbuf.store).items() if not k.startswith("records/.")}
    size = index.stat().st_size
    total = size + len(b"half a record")
    expected = [f"index.sqlite3\t{size} bytes\n", ".store.toml.7.8.tmp\t0 bytes\n",
                f"records/.{record_id}.md.4242.1700000000000000000.tmp\t13 bytes\n"]
    out = sbuf.ok("--project", "gc", "--dry-run")
    assert out.splitlines(keepends=True) == [f"Reclaimable: 3 files, {total} bytes\n", *sorted(expected)]
    assert index.exists() and all(p.exists() for p in leftovers)
    out = sbuf.ok("--project", "gc")
    assert out.splitlines(keepends=True) == [f"Reclaimed: 3 files, {total} bytes\n", *sorted(expected)]
    assert not index.exists() and not any(p.exists() for p in leftovers)
    assert keep.exists() and (sbuf.store / "projection.lock").exists()
    assert {k: v for k, v in snapshot(sbuf.store).items() if not k.startswith("records/.")} == canonical
    # the next read rebuilds the index and answers as before
    blocks = sbuf.result("context", {"query": "release constraint"})["blocks"]
    assert [b["record_id"] for b in blocks] == [record_id] and index.exists()
    # an invalid record does not stop gc (it reads no record)
    (sbuf.records / "broken.md").write_text("not a record\n")
    assert sbuf.ok("--project", "gc").startswith("Reclaimed: 1 files, ")
    assert (sbuf.records / "broken.md").exists()
    assert sbuf.ok("--project", "gc") == "Reclaimed: 0 files, 0 bytes\n"


def test_gc_waits_for_no_writer_and_cleans_the_global_cache(sbuf):
    sbuf.init()
    sbuf.active()
    with open(sbuf.store / "locks" / "mutation.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert "busy" in sbuf.fails("--project", "gc")
    assert (sbuf.store / "index.sqlite3").exists()
    sbuf.ok("init")
    cached = sbuf.cache / "stormbuffer" / "global.sqlite3"
    assert cached.exists()
    out = sbuf.ok("gc")
    assert out.startswith("Reclaimed: 1 files, ") and out.endswith(f"index.sqlite3\t{out.split()[3]} bytes\n")
    assert str(sbuf.root) not in out and not cached.exists()
    assert sbuf.ok("list") == ""
