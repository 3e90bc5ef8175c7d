"""Bounded newline-delimited input for the servers that frame JSON-RPC themselves.

``readline()`` without a limit keeps reading until it meets a newline, so one
endless line from a client would grow a server's memory without bound.
:func:`read_lines` never holds more than ``limit + 1`` bytes of a line: a
longer one is reported as ``None`` (its rest read and dropped in pieces of
``limit`` bytes) and the next line is read as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO


def read_lines(stdin: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """Each line of ``stdin`` (with its newline) up to end of input; ``None`` for a line over ``limit`` bytes."""
    while True:
        line = stdin.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while True:  # drop the rest of the oversized line
                more = stdin.readline(limit)
                if not more or more.endswith(b"\n"):
                    break
            yield None
            continue
        yield line


__all__ = ["read_lines"]
