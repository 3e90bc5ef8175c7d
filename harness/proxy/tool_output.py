"""The packaging a shell tool puts around the text a command printed.

A coding agent that reads a file by running a command (``cat``, ``sed -n 'A,Bp'``,
``nl -ba``) does not hand the model the file's text alone: the tool wraps it.
Codex CLI has two wrappers, both seen as ``function_call_output`` strings:

* a **status header**: ``Key: value`` lines, then a line ``Output:``, then the text
  (its ``shell`` / ``shell_command`` tool: ``Exit code: 0``, ``Wall time: 0.1
  seconds``, ``Total output lines: N`` when it truncated; its ``exec_command``
  tool: ``Chunk ID: ..``, ``Wall time: 0.0021 seconds``, ``Process exited with
  code 0``, ``Original token count: N``);
* a **JSON envelope**: ``{"output": "<the text>", "metadata": {"exit_code": 0,
  "duration_seconds": 0.1}}`` (the structured form of its ``shell`` tool, which
  older releases and some models use), serialized compactly by serde_json.

The text inside is what the proxy compresses, exactly as it would the same text
sent bare; the wrapper goes back around it unchanged: header lines verbatim, the
JSON object re-encoded with its keys in their order and its other values as they
were.  Anything not exactly one of these shapes is not unwrapped (and a text that
is not project code is forwarded as sent either way).
"""

from __future__ import annotations

import json
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


# serde_json's compact form, and the standard library's default one (a client in Python).
_STYLES = (dict(separators=(",", ":"), ensure_ascii=False), dict(ensure_ascii=False), dict(),
           dict(separators=(",", ":")))


class Envelope:
    """A JSON object whose ``output`` string is the command's text, as the client serialized it."""

    __slots__ = ("obj", "style")

    def __init__(self, obj: dict, style: dict):
        self.obj = obj
        self.style = style

    @property
    def text(self) -> str:
        return self.obj["output"]

    def wrap(self, text: str) -> str:
        """The envelope as the client wrote it, with ``text`` in place of its output: the same keys
        in the same order, every other value as it was, the same separators and escaping."""
        return json.dumps({**self.obj, "output": text}, **self.style)


def json_envelope(text: str) -> Envelope | None:
    """The envelope ``text`` is, or None.  Only an object with a string ``output`` and a
    ``metadata`` object (Codex's shape), and only when writing the decoded object back
    reproduces ``text`` byte for byte in one of the usual styles: a value the standard library
    would write differently (``1e-05`` for serde's ``1e-5``, a duplicate key) leaves the text
    as it is rather than forwarding it changed outside the code."""
    if not (text.startswith('{"') and text.endswith("}")) or '"output"' not in text:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("output"), str) \
            or not isinstance(obj.get("metadata"), dict):
        return None
    for style in _STYLES:
        try:
            if json.dumps(obj, **style) == text:
                return Envelope(obj, style)
        except (TypeError, ValueError):
            return None
    return None
