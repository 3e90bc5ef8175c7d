"""Reference rows exactly: scope, folding, counts, first lines and order.

The extractor hands references to the index as folded rows; these pin the
rules the rows follow (the innermost enclosing definition is the scope, uses
identical in one scope are one row counted, the line is the first use's, rows
come in first-use order) on sources where the answers can be read off by eye.
"""

from __future__ import annotations

from memstrata.indexer.languages import get_query_passes
from memstrata.indexer.parse import parse_rows, parse_source

PY = b'''\
import os
LIMIT: int = 3
helper()


def outer(x: Path) -> Path:
    helper()
    os.path.join(x)

    def inner():
        helper()
        helper()
        return os.path.join(x)
    helper()
    return x


class Box(Base):
    size: int

    def open(self):
        self.close()
        self.close()
        close()
helper()
'''


def test_python_rows_exactly():
    result, rows = parse_rows("m.py", "python", PY)
    assert rows == [
        (None, "helper", "call", None, 3, 2),
        ("outer", "Path", "bind", "x", 6, 1),  # `x: Path`: what x is declared as (no edge)
        ("outer", "Path", "type", None, 6, 2),
        ("outer", "helper", "call", None, 7, 2),
        ("outer", "join", "call", "os.path", 8, 1),
        ("outer.inner", "helper", "call", None, 11, 2),
        ("outer.inner", "join", "call", "os.path", 13, 1),
        ("Box", "Base", "inherit", None, 18, 1),
        ("Box.open", "close", "call", "self", 22, 2),
        ("Box.open", "close", "call", None, 24, 1),
    ]
    # int is a builtin type: never a reference
    assert not [r for r in rows if r[1] == "int"]
    assert [(r.scope, r.name, r.kind, r.receiver, r.line, r.count)
            for r in parse_source("m.py", "python", PY).refs] == rows


def test_receiver_whitespace_is_folded():
    source = b"def f():\n    (a\n      .b).c()\n    (a .b).c()\n"
    _, rows = parse_rows("m.py", "python", source)
    assert rows == [("f", "c", "call", "(a .b)", 3, 2)]


def test_rows_on_a_file_that_does_not_parse():
    _, rows = parse_rows("m.py", "python", b"def f(:\n    g()\n")
    assert ("g", "call") in {(r[1], r[2]) for r in rows}


def test_top_level_patterns_run_anchored_at_the_root():
    # Top-level constants are found by a pass that only starts at the root
    # node; nested assignments of the same shape are not constants.
    source = b"LIMIT = 3\nclass A:\n    INNER = 4\ndef f():\n    LOCAL = 5\n"
    result, _ = parse_rows("m.py", "python", source)
    assert [(s.qualname, s.kind) for s in result.symbols] == [("LIMIT", "constant"), ("A", "class"), ("f", "function")]
    depths = [p.max_start_depth for p in get_query_passes("python")]
    assert depths == [None, 0]
