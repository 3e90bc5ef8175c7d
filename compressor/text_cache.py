"""File texts kept between queries of one process (an MCP server, the proxy,
the resident query process).

A slice reads the texts of a hundred files or so, most of them the same
from one question to the next (hubs, the modules a project's questions
keep coming back to): reading each from the store and splitting it into
lines again was a third of a warm query.  An entry is good for as long as
the index's code generation (renewed by every write of a file) is the one
it was read under; after a write, entries whose content hash did not
change are kept and only relabelled.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass

from memstrata.storage import code_index as ci

MAX_CHARS = 64_000_000  # text kept per store, about the source of a 1.5M-line project


@dataclass(slots=True)
class CachedText:
    generation: str
    hash: str
    text: str
    lines: list[str]  # text.split("\n"); shared by every query: never changed in place
    tokens: int | None  # the whole text's token count as the index saved it, if it did
    imports: list[tuple[int, str | None]] | None = None  # (line, target path), once read
    _line_ends: list[int] | None = None

    @property
    def line_ends(self) -> list[int]:
        """Characters up to the end of each line, newline included
        (``line_ends[k]`` covers lines 1..k): a span's size in one subtraction."""
        ends = self._line_ends
        if ends is None:
            ends = [0]
            total = 0
            for line in self.lines:
                total += len(line) + 1
                ends.append(total)
            self._line_ends = ends
        return ends


class TextCache:
    def __init__(self) -> None:
        self.entries: OrderedDict[str, CachedText] = OrderedDict()
        self.chars = 0
        self.lock = threading.Lock()

    def read(self, store, generation: str | None, paths: list[str]) -> dict[str, CachedText]:
        """The texts of ``paths`` that the index holds (missing ones are left out)."""
        found: dict[str, CachedText] = {}
        stale: dict[str, CachedText] = {}
        with self.lock:
            for p in paths:
                hit = self.entries.get(p)
                if hit is None or generation is None:
                    continue
                if hit.generation == generation:
                    self.entries.move_to_end(p)
                    found[p] = hit
                else:
                    stale[p] = hit
        todo = [p for p in paths if p not in found]
        if not todo:
            return found
        rows = ci.file_texts_counted(store, todo)
        with self.lock:
            for p in todo:
                row = rows.get(p)
                if row is None:
                    continue
                text, digest, tokens = row
                old = stale.get(p)
                # Unchanged content keeps its split lines (and str objects, whose hash Python keeps).
                if old is not None and old.hash == digest:
                    entry = CachedText(generation, digest, old.text, old.lines, tokens, _line_ends=old._line_ends)
                else:
                    entry = CachedText(generation, digest, text, text.split("\n"), tokens)
                found[p] = entry
                if generation is not None:
                    self._put(p, entry)
        return found

    def counted(self, path: str, digest: str, tokens: int) -> None:
        """The index now holds ``path``'s token count (saved by this process)."""
        with self.lock:
            hit = self.entries.get(path)
            if hit is not None and hit.hash == digest:
                hit.tokens = tokens

    def _put(self, path: str, entry: CachedText) -> None:
        old = self.entries.pop(path, None)
        if old is not None:
            self.chars -= len(old.text)
        self.entries[path] = entry
        self.chars += len(entry.text)
        while self.chars > MAX_CHARS and len(self.entries) > 1:
            _, dropped = self.entries.popitem(last=False)
            self.chars -= len(dropped.text)


_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def for_store(store) -> TextCache:
    with _caches_lock:
        cache = _caches.get(store)
        if cache is None:
            cache = _caches[store] = TextCache()
        return cache
