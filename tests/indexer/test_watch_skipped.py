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

        (root / "gone.py").symlink_to(root / "nowhere.py")  # a dangling link
        bad = os.fsdecode(b"src/caf\xe9")  # a folder whose name is not UTF-8
        os.makedirs(root / bad)
        (root / bad / "k.py").write_text("x = 1\n")
        ws.apply_changes(Changes({"gone.py", f"{bad}/k.py"}, set()))
        listed = {p: r for p, r, _s in ci.skipped_files(ws.store)}
        assert listed["gone.py"] == "unreadable" and listed["src/caf\ufffd"] == "name_not_utf8"
        assert ci.skipped_files(ws.store) == _fresh(root, tmp_path)
