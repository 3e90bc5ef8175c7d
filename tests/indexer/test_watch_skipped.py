"""The skipped-files list under a watcher stays what a full index of the same tree lists:
files added and removed, a folder moved, a folder that is left out appearing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from memstrata.indexer.watcher import Changes
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci

from ..conftest import write_files


def _fresh(root: Path, tmp: Path) -> list[tuple]:
    copy = tmp / "fresh"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".memstrata"), symlinks=True)
    with Workspace.open(copy, max_file_bytes=4096) as w:
        w.index()
        return ci.skipped_files(w.store)


def test_the_skipped_list_follows_the_tree(tmp_path):
    root = write_files(tmp_path / "proj", {
        "app.py": "def main():\n    return 1\n",
        "notes.txt": "to do\n",
        "tests/pytest.ini": "[pytest]\n",
        "tests/test_app.py": "def test_main():\n    assert True\n",
    })
    with Workspace.open(root, max_file_bytes=4096) as ws:
        ws.index()
        assert ci.skipped_files(ws.store) == _fresh(root, tmp_path)

        (root / "big.py").write_text("x = 1\n" * 2000)
        (root / "blob.py").write_bytes(b"\x00\x01\x02" * 100)
        (root / "more.txt").write_text("more\n")
        ws.apply_changes(Changes({"big.py", "blob.py", "more.txt"}, set()))
        listed = {p: r for p, r, _s in ci.skipped_files(ws.store)}
        assert listed["big.py"] == "too_large" and listed["blob.py"] == "binary"
        assert listed["more.txt"] == "unsupported_language"
        assert ci.skipped_files(ws.store) == _fresh(root, tmp_path)

        for name in ("big.py", "blob.py", "more.txt"):
            (root / name).unlink()
        ws.apply_changes(Changes({"big.py", "blob.py", "more.txt"}, set()))
        assert ci.skipped_files(ws.store) == _fresh(root, tmp_path)

        (root / "tests").rename(root / "suite")
        ws.apply_changes(Changes(set(), {"tests", "suite"}))
        listed = {p for p, _r, _s in ci.skipped_files(ws.store)}
        assert "suite/pytest.ini" in listed and "tests/pytest.ini" not in listed
        assert ci.skipped_files(ws.store) == _fresh(root, tmp_path)

        write_files(root, {"build/gen.py": "x = 1\n"})
        ws.apply_changes(Changes(set(), {"build"}))
        assert ("build/", "excluded_dir", None) in ci.skipped_files(ws.store)
        assert ci.skipped_files(ws.store) == _fresh(root, tmp_path)

        (root / "gone.py").symlink_to("nowhere.py")  # a dangling link (relative: the fresh copy keeps it inside)
        (root / "gone_far.py").symlink_to(tmp_path / "elsewhere" / "nowhere.py")  # dangling, to outside
        bad = os.fsdecode(b"src/caf\xe9")  # a folder whose name is not UTF-8
        os.makedirs(root / bad)
        (root / bad / "k.py").write_text("x = 1\n")
        ws.apply_changes(Changes({"gone.py", "gone_far.py", f"{bad}/k.py"}, set()))
        listed = {p: r for p, r, _s in ci.skipped_files(ws.store)}
        assert listed["gone.py"] == "unreadable" and listed["src/caf\ufffd"] == "name_not_utf8"
        assert listed["gone_far.py"] == "symlink_outside_project"
        assert ci.skipped_files(ws.store) == _fresh(root, tmp_path)


def test_a_folder_replaced_by_a_link_outside_the_project_is_one_entry(tmp_path):
    """A watched folder moved away and a link to a folder outside the project put in its place:
    the link is listed once, as the full scan lists it, and nothing of the folder it points at
    is walked, read or named in the index."""
    outside = write_files(tmp_path / "elsewhere", {"secret.py": "TOKEN = 1\n", "notes/plan.txt": "x\n"})
    root = write_files(tmp_path / "proj", {"app.py": "def main():\n    return 1\n",
                                           "pkg/a.py": "def a():\n    return 2\n"})
    with Workspace.open(root, max_file_bytes=4096) as ws:
        ws.index()
        (root / "pkg").rename(root / "pkg_old")
        (root / "pkg").symlink_to(outside, target_is_directory=True)
        ws.apply_changes(Changes(set(), {"pkg", "pkg_old"}))
        listed = ci.skipped_files(ws.store)
        assert ("pkg/", "symlink_outside_project", None) in listed
        assert not [p for p, _r, _s in listed if p.startswith("pkg/") and p != "pkg/"]
        assert not [p for p in ci.file_paths(ws.store) if p.startswith("pkg/")]
        assert listed == _fresh(root, tmp_path)


def test_a_cap_a_later_index_run_set_holds_for_a_running_watcher(tmp_path):
    """`memstrata index --max-file-size` beside a running watcher: the watcher takes the new cap,
    instead of dropping the large file that run indexed at its next edit."""
    root = write_files(tmp_path / "proj", {"app.py": "def main():\n    return 1\n",
                                           "big.py": "def big():\n    return 2\n" + "x = 1\n" * 2000})
    with Workspace.open(root, max_file_bytes=4096) as watching:
        watching.index()
        assert "big.py" not in ci.file_paths(watching.store)
        with Workspace.open(root, max_file_bytes=1024 * 1024) as run:  # another process's index run
            run.index()
        with open(root / "big.py", "a") as f:
            f.write("y = 2\n")
        watching.apply_changes(Changes({"big.py"}, set()))
        assert "big.py" in ci.file_paths(watching.store)
        assert "big.py" not in {p for p, _r, _s in ci.skipped_files(watching.store)}


def test_an_edit_of_a_file_reaches_the_symlinks_to_it(tmp_path):
    """A symlink inside the project is indexed with its target's text: editing the target (the only
    path a watcher hears of) updates the link too, as a fresh index would read it."""
    root = write_files(tmp_path / "proj", {"args.py": "def parse():\n    return 1\n"})
    os.symlink("args.py", root / "alias.py")
    with Workspace.open(root) as ws:
        ws.index()
        with open(root / "args.py", "a") as f:
            f.write("\n\ndef via_link():\n    return 2\n")
        ws.apply_changes(Changes({"args.py"}, set()))
        defined = {p for (p,) in ws.store.execute(
            "SELECT f.path FROM symbols s JOIN files f ON f.id = s.file_id WHERE s.name = 'via_link'")}
        assert defined == {"args.py", "alias.py"}
        os.symlink("args.py", root / "late.py")  # a link made while watching
        ws.apply_changes(Changes({"late.py"}, set()))
        with open(root / "args.py", "a") as f:
            f.write("\n\ndef later():\n    return 3\n")
        ws.apply_changes(Changes({"args.py"}, set()))
        defined = {p for (p,) in ws.store.execute(
            "SELECT f.path FROM symbols s JOIN files f ON f.id = s.file_id WHERE s.name = 'later'")}
        assert defined == {"args.py", "alias.py", "late.py"}


def test_an_index_that_dropped_a_large_file_gives_its_pages_back(tmp_path, monkeypatch):
    """Deleted rows leave their pages in the file: once they are many, the index is compacted
    (and its WAL cut back), so it does not stay at its largest size for ever."""
    from memstrata.storage import db

    monkeypatch.setattr(db, "RECLAIM_MIN_BYTES", 256 * 1024)
    body = "".join(f"def generated_{i}(x):\n    return x + {i}\n\n" for i in range(20000))
    root = write_files(tmp_path / "proj", {"app.py": "def main():\n    return 1\n", "gen.py": body})
    index = root / ".memstrata" / "index.db"
    with Workspace.open(root, max_file_bytes=4 * 1024 * 1024) as ws:
        ws.index()
        largest = index.stat().st_size
        (root / "gen.py").unlink()
        ws.apply_changes(Changes({"gen.py"}, set()))
        assert index.stat().st_size < largest / 2
        assert ws.store.integrity_ok() and ci.file_paths(ws.store) == ["app.py"]
        assert ws.store.execute("SELECT count(*) FROM symbols_fts WHERE symbols_fts MATCH 'main'")[0][0] == 1
