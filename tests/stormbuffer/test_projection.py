"""The SQLite projection: synced before every read, rebuilt at will, cheap when nothing changed."""

from __future__ import annotations

import os
import shutil
import threading

import pytest

from memstrata.stormbuffer import projection as projection_module
from memstrata.stormbuffer.core import Core, View
from memstrata.stormbuffer.errors import SbufError
from memstrata.stormbuffer.stores import init_store
from memstrata.stormbuffer.watch import open_feed

from .helpers import hand_written


@pytest.fixture
def view(sbuf):
    v = View.resolve("project", cwd=sbuf.project, env=sbuf.env)
    init_store(v.selected, shared=False)
    yield v
    v.close()


@pytest.fixture
def reads(monkeypatch):
    """Count the record files a sync reads (the real reader still runs)."""
    seen: list[str] = []
    original = projection_module.Projection._read

    def counting(self, rel, st, now):
        seen.append(rel)
        return original(self, rel, st, now)

    monkeypatch.setattr(projection_module.Projection, "_read", counting)
    return seen


@pytest.fixture
def settled(monkeypatch):
    """Files count as old enough to trust their stat at once (no racy window)."""
    monkeypatch.setattr(projection_module, "RACY_WINDOW_NS", -10**18)


def test_unchanged_files_are_not_read(view, sbuf, reads, settled):
    ids = [hand_written(sbuf.records, title=f"Note {n}", body=f"body number {n}\n") for n in range(20)]
    proj = view.projection(view.selected)
    assert proj.sync().added == 20 and len(reads) == 20
    reads.clear()
    report = proj.sync()
    assert reads == [] and not report.changed and report.files == 20
    path = sbuf.record_file(ids[3])
    path.write_text(path.read_text().replace("number 3", "number three"), encoding="utf-8")
    report = proj.sync()
    assert reads == [f"{ids[3]}.md"] and report.updated == 1
    reads.clear()
    os.utime(sbuf.record_file(ids[4]))  # touched, same bytes: read and hashed, not re-projected
    report = proj.sync()
    assert reads == [f"{ids[4]}.md"] and report.updated == 0


def test_recently_written_files_are_hashed_again(view, sbuf, reads):
    hand_written(sbuf.records, title="Fresh")
    proj = view.projection(view.selected)
    proj.sync()
    report = proj.sync()  # its stat is too recent to trust: hashed again, nothing re-projected
    assert len(reads) == 2 and report.updated == 0


def test_change_feed_sees_every_kind_of_change(view, sbuf, reads, settled):
    if open_feed(sbuf.records) is None:
        pytest.skip("no inotify on this filesystem")
    watched = View.resolve("project", cwd=sbuf.project, env=sbuf.env, watch=True)
    proj = watched.projection(watched.selected)
    first = hand_written(sbuf.records, title="First")
    assert proj.sync().added == 1
    reads.clear()
    assert not proj.sync().changed and reads == []
    nested = sbuf.records / "a" / "b"
    nested.mkdir(parents=True)
    second = hand_written(nested, title="Nested")
    assert proj.sync().added == 1
    moved = sbuf.records / "a" / f"{second}.md"
    os.replace(nested / f"{second}.md", moved)
    report = proj.sync()
    assert report.added == 1 and report.removed == 1
    with open(sbuf.record_file(first), "a", encoding="utf-8") as fh:  # an in-place edit
        fh.write("appended line\n")
    reads.clear()
    assert proj.sync().updated == 1 and reads == [f"{first}.md"]
    shutil.rmtree(sbuf.records / "a")
    assert proj.sync().removed == 1
    core = Core(watched)
    assert [b["record_id"] for b in core.invoke("context", {"version": 1, "query": "appended"})["result"]["blocks"]] \
        == [first]
    watched.close()


def test_a_deleted_or_corrupt_index_is_rebuilt(view, sbuf):
    record_id = hand_written(sbuf.records, title="Survivor")
    core = Core(view)
    assert core.invoke("get", {"version": 1, "id": record_id})["ok"]
    view.close()
    for suffix in ("", "-wal", "-shm"):
        (sbuf.store / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    assert core.invoke("get", {"version": 1, "id": record_id})["ok"]
    view.close()
    (sbuf.store / "index.sqlite3").write_bytes(b"this is not a database" * 100)
    (sbuf.store / "index.sqlite3-wal").unlink(missing_ok=True)
    assert core.invoke("get", {"version": 1, "id": record_id})["result"]["title"] == "Survivor"


def test_an_index_deleted_under_a_running_process_is_rebuilt(view, sbuf):
    record_id = hand_written(sbuf.records, title="Survivor")
    core = Core(view)
    assert core.invoke("get", {"version": 1, "id": record_id})["ok"]
    for suffix in ("", "-wal", "-shm"):
        (sbuf.store / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    assert core.invoke("get", {"version": 1, "id": record_id})["ok"]
    assert (sbuf.store / "index.sqlite3").exists()


def test_oversized_binary_and_symlinked_files(view, sbuf, tmp_path):
    proj = view.projection(view.selected)
    with open(sbuf.records / "huge.md", "wb") as fh:
        fh.truncate(projection_module.MAX_RECORD_FILE_BYTES + 1)
    (sbuf.records / "binary.md").write_bytes(bytes(range(256)) * 10)
    outside = tmp_path / "outside.md"
    outside.write_bytes((sbuf.records / "binary.md").read_bytes())
    (sbuf.records / "link.md").symlink_to(outside)
    report = proj.sync()
    assert report.invalid == 2 and report.files == 2  # the symlink is not a record file
    problems = dict(proj.problems().invalid)
    assert problems == {"huge.md": "record file is too large", "binary.md": "record file is not valid UTF-8"}
    with pytest.raises(SbufError) as err:
        proj.require_valid(writing=False)
    assert err.value.code == "invalid_record"


def test_duplicate_ids_are_a_problem_until_one_goes(view, sbuf):
    proj = view.projection(view.selected)
    record_id = hand_written(sbuf.records, title="One")
    proj.sync()
    assert not proj.problems()
    shutil.copy(sbuf.record_file(record_id), sbuf.records / "copy.md")
    proj.sync()
    assert proj.problems().duplicates == [(record_id, [f"{record_id}.md", "copy.md"])]
    (sbuf.records / "copy.md").unlink()
    proj.sync()
    assert not proj.problems()


def test_two_processes_keep_each_other_current(view, sbuf, settled):
    """One process's sync commits; the other reloads only what changed and stays right."""
    a = view.projection(view.selected)
    other = View.resolve("project", cwd=sbuf.project, env=sbuf.env)
    b = other.projection(other.selected)
    ids = [hand_written(sbuf.records, title=f"N{n}") for n in range(5)]
    a.sync()
    b.sync()
    path = sbuf.record_file(ids[0])
    path.write_text(path.read_text().replace("by hand", "by a second hand"), encoding="utf-8")
    sbuf.record_file(ids[1]).unlink()
    assert b.sync().updated == 1
    report = a.sync()  # b already projected both changes
    assert not report.changed and report.files == 4
    core = Core(view)
    assert core.invoke("get", {"version": 1, "id": ids[1]})["error"]["code"] == "not_found"
    assert "second hand" in core.invoke("get", {"version": 1, "id": ids[0]})["result"]["body"]
    other.close()


def test_a_foreign_index_at_the_same_path_is_replaced(view, sbuf):
    """Stormbuffer itself keeps .sbuf/index.sqlite3 with another schema."""
    import sqlite3
    record_id = hand_written(sbuf.records, title="Mine")
    foreign = sqlite3.connect(sbuf.store / "index.sqlite3")
    foreign.executescript("CREATE TABLE records (id TEXT); PRAGMA user_version = 4;")
    foreign.close()
    core = Core(view)
    assert core.invoke("get", {"version": 1, "id": record_id})["result"]["title"] == "Mine"


@pytest.mark.parametrize("watch", [False, True])
def test_a_file_caught_between_an_editors_truncation_and_its_write_is_read_once_written(view, sbuf, watch):
    # An editor saving in place truncates the file, then writes it.  A sync (`sbuf watch`, a
    # read) that looks in between sees an empty or cut-off file: it must not take that for the
    # record (an invalid file, a record gone), only the saved text (one update, nothing invalid).
    if watch and open_feed(sbuf.records) is None:
        pytest.skip("no inotify on this filesystem")
    rid = hand_written(sbuf.records, title="Saved in place", body="the first text\n")
    v = View.resolve("project", cwd=sbuf.project, env=sbuf.env, watch=watch) if watch else view
    proj = v.projection(v.selected)
    try:
        assert proj.sync().added == 1
        path = sbuf.record_file(rid)
        for word, cut in (("second", 0), ("third", 3)):
            saved = path.read_bytes().replace(b"the first text", f"the {word} text".encode())
            saved = saved.replace(b"the second text", f"the {word} text".encode())
            partial = saved[: len(saved) // cut] if cut else b""
            with open(path, "wb") as fh:  # truncated, and maybe part written: the editor is mid-save
                fh.write(partial)
                fh.flush()
                finish = threading.Timer(0.15, lambda: (fh.write(saved[len(partial):]), fh.flush()))
                finish.start()
                report = proj.sync()
                finish.join()
            report2 = proj.sync()
            assert (report.updated + report2.updated, report.invalid, report2.invalid) == (1, 0, 0), (word, report)
            assert not proj.problems().invalid
            blocks = Core(v).invoke("context", {"version": 1, "query": word})["result"]["blocks"]
            assert [b["record_id"] for b in blocks] == [rid]
    finally:
        if watch:
            v.close()
