"""A cold index writes the same rows whether its files are parsed in this
process or in worker processes: every fixture project in one tree (more files
than an index run parses in-process, several languages), indexed both ways."""

from __future__ import annotations

import shutil
from pathlib import Path

from memstrata.indexer.run import _BATCH_FILES, _INLINE_BELOW
from memstrata.indexer.workspace import Workspace
from tests.index_rows import TABLES, index_rows

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

def rows_of(root: Path, workers: int) -> dict[str, list]:
    with Workspace.open(root, workers=workers) as ws:
        summary = ws.indexer.index_all()
        assert summary.parsed > _INLINE_BELOW + _BATCH_FILES  # workers=2 really uses processes
        return index_rows(ws.store)


def test_one_process_and_two_workers_write_identical_rows(tmp_path):
    roots = []
    for side in ("inline", "workers"):
        root = tmp_path / side
        for project in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
            shutil.copytree(project, root / project.name)  # copy2: the same mtimes on both sides
        roots.append(root)
    inline, pooled = rows_of(roots[0], workers=1), rows_of(roots[1], workers=2)
    assert {k: len(v) for k, v in pooled.items()} == {k: len(v) for k, v in inline.items()}
    for name in TABLES:
        assert pooled[name] == inline[name], name
    assert len(inline["symbols"]) > 200 and len(inline["refs"]) > 200
    assert [r[0] for r in inline["search"]] == [r[0] for r in inline["symbols"]]
