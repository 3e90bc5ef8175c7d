"""The packaging a shell tool puts around the text a command printed.

A coding agent that reads a file by running a command (``cat``, ``sed -n 'A,Bp'``,
``nl -ba``) does not hand the model the file's text alone: the tool wraps it.
Codex CLI writes a **status header**: ``Key: value`` lines, then a line
``Output:``, then the text (its ``shell`` / ``shell_command`` tool: ``Exit code:
0``, ``Wall time: 0.1 seconds``, ``Total output lines: N`` when it truncated;
its ``exec_command`` tool: ``Chunk ID: ..``, ``Wall time: 0.0021 seconds``,
``Process exited with code 0``, ``Original token count: N``).

The text inside is what the proxy compresses, exactly as it would the same text
sent bare; the header goes back in front of it as it came.  Anything not exactly
this shape is not unwrapped (and a text that is not project code is forwarded as
sent either way).
"""

from __future__ import annotations

import re

# One line of a status header.  Only the lines Codex writes: a line of the command's own output
# that happens to look like ``Key: value`` must not be taken for a header and skipped.
_HEADER_LINE = re.compile(
    r"(?:Exit code: -?\d+"
    r"|Wall time: \d+(?:\.\d+)? seconds"
    r"|Total output lines: \d+"
    r"|Chunk ID: [\w-]+"
    r"|Process exited with code -?\d+"
    r"|Process running with session ID \d+"
    r"|Original token count: \d+)")
_OUTPUT_LINE = "Output:"
MAX_HEADER_LINES = 8


def header_length(text: str) -> int:
    """How many characters of ``text`` are a shell tool's status header, its ``Output:`` line and
    that line's break included (the command's text starts there); 0 when ``text`` does not start
    with one.  Every line before ``Output:`` must be a header line, and one of them the wall time
    both of Codex's tools write, so an output that merely contains a line ``Output:`` is not cut."""
    if not text.startswith(("Exit code: ", "Wall time: ", "Chunk ID: ")):
        return 0
    pos = 0
    wall = False
    for _ in range(MAX_HEADER_LINES + 1):
        end = text.find("\n", pos)
        if end < 0:
            return 0
        line = text[pos:end]
        if line == _OUTPUT_LINE:
            return end + 1 if wall else 0
        if not _HEADER_LINE.fullmatch(line):
            return 0
        wall = wall or line.startswith("Wall time: ")
        pos = end + 1
    return 0
