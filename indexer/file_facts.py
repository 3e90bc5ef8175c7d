"""One indexed file's text and definitions as they are on disk right now.

The index (and the graph built from it) may lag behind the disk: a watcher
applies edits after a short debounce, and a command run without one sees
whatever the last index run saw.  Whoever hands out line ranges or source
text must not hand out stale ones, so :func:`current_facts` compares the
file on disk with its index row (size and mtime, then the content hash)
and, when they differ, parses the file again in this process instead of
trusting the rows.  Nothing is written: the index catches up on its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from memstrata.storage import Store, code_nav

from .languages import language_for_path
from .scan import SkipFile, decode_source, link_target
from .worker import Parsed, Skipped, content_hash, parse_bytes, read_bytes


class StaleFile(Exception):
    """The file changed since it was indexed and cannot be read again (gone,
    unreadable, binary, too large): the message says which."""


@dataclass(slots=True, frozen=True)
class Definition:
    name: str
    qualname: str
    kind: str
    parent: str | None
    start_line: int
    end_line: int
    signature: str


@dataclass(slots=True)
class FileFacts:
    path: str
    language: str | None
    file_id: int
    reread: bool  # True: parsed from the disk now, the index row is older
    definitions: list[Definition]
    # Uses parsed now, as (scope, name, kind, receiver, line, count); only
    # when ``reread`` (otherwise they are the index's rows).
    refs: list[tuple] = field(default_factory=list)
    imports: list[tuple] = field(default_factory=list)  # (module, name, alias, line), when reread
    _text: str | None = None
    _store: Store | None = None
    _lines: list[str] | None = None
    _by_qualname: dict[str, Definition] | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            assert self._store is not None
            self._text = code_nav.file_text(self._store, self.file_id) or ""
        return self._text

    def lines(self) -> list[str]:
        """The text split after each line break, the breaks kept (so joined
        back the lines are byte for byte the file's).  Only ``\n`` ends a line,
        as in the parser's rows and the index's line counts: ``str.splitlines``
        also breaks at a form feed (a page break in older sources), a lone
        carriage return and Unicode's line separators (U+2028 in a string
        literal), and every line after one would be off by one."""
        if self._lines is None:
            parts = self.text.split("\n")
            lines = [part + "\n" for part in parts[:-1]]
            if parts[-1]:
                lines.append(parts[-1])
            self._lines = lines
        return self._lines

    def line(self, n: int) -> str:
        lines = self.lines()
        return lines[n - 1] if 1 <= n <= len(lines) else ""

    def span_text(self, start: int, end: int) -> str:
        """Lines ``start``..``end`` (1-based, inclusive) exactly as in the
        file, without the last line's break."""
        text = "".join(self.lines()[start - 1 : end])
        for eol in ("\r\n", "\n", "\r"):
            if text.endswith(eol):
                return text[: -len(eol)]
        return text

    def definition(self, qualname: str) -> Definition | None:
        if self._by_qualname is None:
            index: dict[str, Definition] = {}
            for d in self.definitions:
                index.setdefault(d.qualname, d)  # a redefinition keeps the first, as the graph does
            self._by_qualname = index
        return self._by_qualname.get(qualname)


def current_facts(root: Path | None, store: Store, path: str, max_file_bytes: int) -> FileFacts | None:
    """The facts of indexed file ``path`` as it is now; None when it is not
    in the index.  Raises :class:`StaleFile` when it changed and cannot be
    read again.  Without a ``root`` (a shared index read away from its
    checkout) the index is all there is: its facts are the answer."""
    row = code_nav.file_row(store, path)
    if row is None:
        return None
    if root is None:
        return _from_index(store, row)
    abs_path = os.path.join(root, path)
    try:
        st = os.stat(abs_path)
    except FileNotFoundError:
        raise StaleFile(f"{path} was deleted since it was indexed") from None
    except OSError:
        raise StaleFile(f"{path} cannot be read any more") from None
    if st.st_size == row.size and st.st_mtime_ns == row.mtime_ns:
        return _from_index(store, row)
    if link_target(Path(os.path.realpath(root)), abs_path) is None:
        # The file (or a folder above it) became a symlink to a place outside the project since it
        # was indexed (a checkout, a hostile pull): what it points at is never read nor served.
        raise StaleFile(f"{path} changed since it was indexed and now leads outside the project (a symlink)")
    data = read_bytes(abs_path, path, max_file_bytes)
    if isinstance(data, Skipped):
        reason = {"too_large": "grew past the file-size cap"}.get(data.reason, f"cannot be read ({data.reason})")
        raise StaleFile(f"{path} changed since it was indexed and {reason}")
    if content_hash(data) == row.hash:  # touched, not changed
        return _from_index(store, row)
    language = row.language or language_for_path(path)
    try:
        decode_source(data)
    except SkipFile as skip:
        raise StaleFile(f"{path} changed since it was indexed and is no longer text ({skip.reason})") from None
    parsed = parse_bytes(path, language, data, st.st_mtime_ns)
    if not isinstance(parsed, Parsed):  # decode_source passed above, so this is a parse refusal
        raise StaleFile(f"{path} changed since it was indexed and cannot be parsed")
    defs = [Definition(name, qual, kind, parent, sl, el, sig)
            for name, qual, kind, parent, _sb, _eb, sl, el, sig, _doc in parsed.symbols]
    facts = FileFacts(path, language, row.id, True, defs, refs=list(parsed.refs),
                      imports=[tuple(i[:4]) for i in parsed.imports], _text=parsed.text)
    return _python_extents(facts)


def _from_index(store: Store, row: code_nav.FileRow) -> FileFacts:
    defs = [Definition(*r) for r in code_nav.file_symbols(store, row.id)]
    return _python_extents(FileFacts(row.path, row.language, row.id, False, defs, _store=store))


def _python_extents(facts: FileFacts) -> FileFacts:
    """Python definitions end at their last statement, as Python's own ``ast``
    says: tree-sitter also counts comments and blank lines that trail inside
    the indented block, which belong to no statement (and often introduce
    what follows)."""
    if facts.language != "python" or not facts.definitions:
        return facts
    lines = facts.lines()
    trimmed = []
    for d in facts.definitions:
        end = d.end_line
        while end > d.start_line and end <= len(lines) and _inert(lines[end - 1]):
            end -= 1
        trimmed.append(d if end == d.end_line else
                       Definition(d.name, d.qualname, d.kind, d.parent, d.start_line, end, d.signature))
    facts.definitions = trimmed
    return facts


def _inert(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")
