"""The projection is disposable under a running ``stormbuffer-mcp`` (spec 1.3, 7.5): delete
``index.sqlite3`` and its side files while the server runs, and the next recall rebuilds
it from the Markdown and answers as before."""

from __future__ import annotations

import json

import anyio
import pytest

from .conftest import SOURCE
from .helpers import hand_written
from .test_mcp_stdio import envelope_of, run_sdk

pytestmark = pytest.mark.timeout(180)


def _without_receipt_ids(envelope: dict) -> dict:
    envelope = json.loads(json.dumps(envelope))
    receipt = envelope["result"]["receipt"]
    del receipt["receipt_id"], receipt["retrieved_at"]
    return envelope


def _index_files(sbuf) -> list:
    return [p for p in (sbuf.store / "index.sqlite3", sbuf.store / "index.sqlite3-wal",
                        sbuf.store / "index.sqlite3-shm") if p.exists()]


@pytest.mark.parametrize("also_lock", [False, True])
def test_deleting_the_index_under_a_running_server_rebuilds_it(sbuf, tmp_path, also_lock):
    sbuf.init()
    first = sbuf.active()
    second = sbuf.active(title="Deploy checklist", body="check the release notes before each deploy\n")
    query = {"query": "release", "budget": 256}

    async def steps(session):
        before = envelope_of(await session.call_tool("memory_recall", query))
        got_before = envelope_of(await session.call_tool("memory_get", {"id": first}))
        deleted = _index_files(sbuf)
        for path in deleted:
            path.unlink()
        if also_lock:
            (sbuf.store / "projection.lock").unlink()
        after = envelope_of(await session.call_tool("memory_recall", query))
        rebuilt = (sbuf.store / "index.sqlite3").exists()
        got_after = envelope_of(await session.call_tool("memory_get", {"id": first}))
        # Deleted again, and a record written by hand meanwhile: found too.
        for path in _index_files(sbuf):
            path.unlink()
        third = hand_written(sbuf.records, title="Release train", body="the release train leaves on Monday\n")
        later = envelope_of(await session.call_tool("memory_recall", query))
        remembered = envelope_of(await session.call_tool("memory_remember", {
            "title": "Deploy checklist", "kind": "decision",
            "body": "check the release notes before each deploy\n", "source": SOURCE}))
        # `sbuf gc` removes it under the server too
        cleaned = await anyio.to_thread.run_sync(lambda: sbuf.ok("--project", "gc"))
        after_gc = envelope_of(await session.call_tool("memory_recall", query))
        return before, got_before, deleted, after, rebuilt, got_after, third, later, remembered, cleaned, after_gc

    _, out = run_sdk(sbuf, tmp_path, ["--project", "--allow-writes"], steps)
    before, got_before, deleted, after, rebuilt, got_after, third, later, remembered, cleaned, after_gc = out
    assert "index.sqlite3\t" in cleaned and _without_receipt_ids(after_gc) == _without_receipt_ids(later)
    assert deleted[0].name == "index.sqlite3"
    assert {b["record_id"] for b in before["result"]["blocks"]} == {first, second}
    assert rebuilt
    assert _without_receipt_ids(after) == _without_receipt_ids(before)
    assert got_after == got_before and got_after["ok"]
    assert {b["record_id"] for b in later["result"]["blocks"]} == {first, second, third}
    # the duplicate check reads the rebuilt projection as well
    assert remembered["result"]["outcome"] == "duplicate_of" and remembered["result"]["related_id"] == second


@pytest.mark.parametrize("target", ["missing", "existing"])
def test_a_link_in_place_of_the_projection_is_removed_not_written_through(sbuf, tmp_path, target):
    # A store committed with a repository can carry links where the projection goes: the file
    # they name is neither created nor changed, and the projection is rebuilt in the store.
    sbuf.init()
    record = sbuf.active()
    for path in _index_files(sbuf):
        path.unlink()
    outside = tmp_path / "outside"
    outside.mkdir()
    named = outside / "notes.txt"
    if target == "existing":
        named.write_text("precious\n")
    (sbuf.store / "index.sqlite3").symlink_to(named)
    (sbuf.store / "index.sqlite3-wal").symlink_to(outside / "wal")
    assert record in sbuf.ok("--project", "list", "--all")
    assert sorted(p.name for p in outside.iterdir()) == (["notes.txt"] if target == "existing" else [])
    if target == "existing":
        assert named.read_text() == "precious\n"
    index = sbuf.store / "index.sqlite3"
    assert index.is_file() and not index.is_symlink()


def test_a_store_folder_linked_outside_the_project_is_refused(sbuf, tmp_path):
    # A cloned repository can carry .sbuf as a link to any folder: nothing is created, written or
    # read there.  A link to a folder inside the project is the project's own business.
    outside = tmp_path / "outside"
    outside.mkdir()
    sbuf.store.symlink_to(outside)
    err = sbuf.fails("--project", "init")
    assert ".sbuf/ is a link to a folder outside the project" in err
    assert list(outside.iterdir()) == []
    sbuf.store.unlink()
    inside = sbuf.project / "notes-store"
    inside.mkdir()
    sbuf.store.symlink_to(inside)
    sbuf.init()
    assert (inside / "store.toml").is_file()


@pytest.mark.parametrize("name", ["projection.lock", "locks/mutation.lock"])
def test_a_link_in_place_of_a_lock_file_is_never_followed(sbuf, tmp_path, name):
    # Lock files are opened with O_CREAT: a link in their place would have an empty file created
    # where it points.  It is refused with its name, and the named file never appears.
    sbuf.init()
    record = sbuf.active()
    outside = tmp_path / "outside"
    outside.mkdir()
    lock = sbuf.store / name
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside / "created")
    err = sbuf.fails("--project", "approve", record) if name.startswith("locks") else \
        sbuf.fails("--project", "list", "--all")
    assert f"the lock file {lock.name} is a link" in err
    assert list(outside.iterdir()) == []
