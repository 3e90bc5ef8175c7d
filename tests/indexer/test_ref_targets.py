"""The resolved targets saved in the index's refs rows follow the tree: after any sequence of
edits, index runs and watcher batches they (and so `refs`) are what a fresh index of the same
tree holds -- also for a reference whose own file never changed, whose resolution became None
or moved to another definition, and one that resolved to its own enclosing function."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memstrata.compressor.navigation import find_references
from memstrata.indexer.graph import CodeGraph
from memstrata.indexer.watcher import Changes
from memstrata.indexer.workspace import Workspace
from memstrata.storage import StoreFull
from memstrata.storage import code_index as ci

from ..conftest import write_files

# `wrapper.wrap()` is a call on a library object: with site.py's `Site.wrap` beside it the name is
# ambiguous and stays unresolved; without it the one `wrap` left is text.py's own.
TEXT = ("import textwrap\n\ndef wrap(text, width):\n    wrapper = textwrap.TextWrapper(width=width)\n"
        "    return wrapper.wrap(text)\n")
MAIN = 'from text import wrap\n\ndef main():\n    return wrap("a b", 3)\n'
SITE = "class Site:\n    def wrap(self, view):\n        return view\n"

HELPER = "def helper(x):\n    return x + 1\n"
CALLER = "def use(y):\n    return helper(y) * 2\n"  # no import: the one `helper` of the project
OTHER = "def other():\n    return 0\n"


def stored_targets(ws: Workspace) -> dict[tuple, str | None]:
    rows = ws.store.execute(
        "SELECT f.path, r.scope, r.name, r.kind, r.receiver, r.target FROM refs r"
        " JOIN files f ON f.id = r.file_id WHERE r.kind != 'bind'")
    return {tuple(row[:5]): row[5] for row in rows}


def answers(ws: Workspace, symbol: str) -> tuple[list, int]:
    out = find_references(ws, symbol)
    return [(r["path"], r["line"], r["kind"]) for r in out["references"]], out["unattributed"]


def fresh(root: Path, tmp_path: Path, symbol: str) -> tuple[dict, tuple]:
    """Stored targets and `refs` answer of a fresh index of a copy of ``root``'s tree."""
    copy = tmp_path / f"fresh{len(list(tmp_path.glob('fresh*')))}"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".memstrata"))
    with Workspace.open(copy, workers=1) as ws:
        ws.index()
        _ = ws.graph  # the first graph writes the targets it resolves
        return stored_targets(ws), answers(ws, symbol)


def assert_as_fresh(ws: Workspace, tmp_path: Path, symbol: str) -> None:
    targets, answer = fresh(ws.root, tmp_path, symbol)
    assert stored_targets(ws) == targets
    assert answers(ws, symbol) == answer
    assert CodeGraph.load(ws.store).take_resolved_targets() == []  # a graph built afresh agrees


def _step(root: Path, files: dict[str, str | None]) -> None:
    for rel, text in files.items():
        if text is None:
            (root / rel).unlink()
        else:
            write_files(root, {rel: text})


class Watching:
    """One long-lived workspace, its graph refreshed by watcher batches."""

    def __init__(self, root: Path):
        self.ws = Workspace.open(root, workers=1)
        self.ws.index()
        _ = self.ws.graph

    def change(self, files: dict[str, str | None]) -> Workspace:
        _step(self.ws.root, files)
        self.ws.apply_changes(Changes(set(files), set()))
        _ = self.ws.graph
        return self.ws

    def close(self) -> None:
        self.ws.close()


class IndexInProcess(Watching):
    """One long-lived workspace, caught up by `index` runs of its own."""

    def change(self, files: dict[str, str | None]) -> Workspace:
        _step(self.ws.root, files)
        self.ws.index()
        _ = self.ws.graph
        return self.ws


class IndexRuns:
    """`memstrata index` then a command in another process: a workspace per step, the graph
    built by the reader from the rows."""

    def __init__(self, root: Path):
        self.root = root
        self.ws: Workspace | None = None
        self.change({})

    def change(self, files: dict[str, str | None]) -> Workspace:
        _step(self.root, files)
        self.close()
        with Workspace.open(self.root, workers=1) as indexer:
            indexer.index()
        self.ws = Workspace.open(self.root, workers=1)
        _ = self.ws.graph
        return self.ws

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None


MODES = {"watch": Watching, "index": IndexInProcess, "index-runs": IndexRuns}


@pytest.fixture(params=sorted(MODES))
def mode(request):
    return MODES[request.param]


def run(mode, root: Path, steps: list[dict[str, str | None]], tmp_path: Path, symbol: str) -> None:
    m = mode(root)
    try:
        for files in steps:
            ws = m.change(files)
            assert_as_fresh(ws, tmp_path, symbol)
    finally:
        m.close()


def test_a_target_whose_rival_goes_and_comes_back(mode, tmp_path):
    """The repro: `wrapper.wrap()` resolves to its own enclosing `wrap` while `Site.wrap` is away;
    with it back the tree is the first one again, and so must be the stored target and `refs`."""
    root = tmp_path / "p"
    write_files(root, {"text.py": TEXT, "main.py": MAIN, "site.py": SITE})
    run(mode, root, [{"site.py": None}, {"site.py": SITE}], tmp_path, "text.py::wrap")


def test_a_target_removed_leaves_the_reference_unresolved(mode, tmp_path):
    root = tmp_path / "p"
    write_files(root, {"lib.py": HELPER + OTHER, "app.py": CALLER})
    run(mode, root, [{"lib.py": OTHER}, {"lib.py": HELPER + OTHER}, {"lib.py": None}], tmp_path, "app.py::use")


def test_a_target_moved_to_another_file(mode, tmp_path):
    root = tmp_path / "p"
    write_files(root, {"lib.py": HELPER + OTHER, "app.py": CALLER, "more.py": "X = 1\n"})
    run(mode, root, [{"lib.py": OTHER, "more.py": "X = 1\n\n" + HELPER},
                     {"lib.py": HELPER + OTHER, "more.py": "X = 1\n"}], tmp_path, "app.py::use")


def test_the_repro_in_one_store_after_restarts(tmp_path):
    """The stored target of the watcher's earlier batches is put right by the next process that
    builds the graph, and `refs` lists what a fresh index does (2 uses, 1 not attributed)."""
    root = tmp_path / "p"
    write_files(root, {"text.py": TEXT, "main.py": MAIN, "site.py": SITE})
    m = Watching(root)
    try:
        m.change({"site.py": None})
        m.change({"site.py": SITE})
    finally:
        m.close()
    with Workspace.open(root, workers=1) as ws:
        refs, unattributed = answers(ws, "text.py::wrap")
        assert refs == [("main.py", 1, "import"), ("main.py", 4, "call")]
        assert unattributed == 1
        assert ws.store.execute("SELECT target FROM refs WHERE receiver = 'wrapper'") == [(None,)]


def test_refs_does_not_trust_a_stored_target_that_names_a_gone_symbol(tmp_path):
    """A row left pointing at a definition that no longer exists (written by a process that could
    not write again) is no use of anything: `refs` asks the graph instead."""
    root = tmp_path / "p"
    write_files(root, {"lib.py": HELPER + OTHER, "app.py": CALLER})
    with Workspace.open(root, workers=1) as ws:
        ws.index()
        _ = ws.graph
        with ws.store.write() as conn:
            conn.execute("UPDATE refs SET target = 'lib.py::gone' WHERE name = 'helper'")
        assert answers(ws, "lib.py::helper")[0] == [("app.py", 2, "call")]


def test_targets_that_could_not_be_written_are_written_at_the_next_chance(tmp_path, monkeypatch):
    root = tmp_path / "p"
    write_files(root, {"lib.py": HELPER + OTHER, "app.py": CALLER})
    with Workspace.open(root, workers=1) as ws:
        ws.index()
        _ = ws.graph
        real = ci.set_ref_targets

        def full(conn, rows):
            raise StoreFull("disk full")

        monkeypatch.setattr(ci, "set_ref_targets", full)
        _step(root, {"lib.py": OTHER})
        ws.apply_changes(Changes({"lib.py"}, set()))
        assert ws.store.execute("SELECT target FROM refs WHERE name = 'helper'") == [("lib.py::helper",)]
        monkeypatch.setattr(ci, "set_ref_targets", real)
        _step(root, {"more.py": "X = 1\n"})
        ws.apply_changes(Changes({"more.py"}, set()))
        assert ws.store.execute("SELECT target FROM refs WHERE name = 'helper'") == [(None,)]
