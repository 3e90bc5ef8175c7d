"""Kura's search: validation and result shaping shared by MCP and the HTTP API.

The daemon's HTTP API and the MCP tools (:mod:`.mcp`) both call
:class:`KuraSearch`, so a search answers identically everywhere.  Which
databases exist and how they are opened is the host's business: it passes a
:class:`KuraCatalog` (the daemon's live set of watched databases, or the
stdio process's read-only set).
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any, Protocol

from memstrata.storage import Store
from . import store as kura_store

DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MODES = ("keyword",)


class InvalidArgument(ValueError):
    """A caller mistake; the message is shown as is (tool error / HTTP 400)."""


class DatabaseUnavailable(InvalidArgument):
    """The database exists but cannot be read right now (corrupt, deleted under us)."""


class KuraCatalog(Protocol):
    """The databases a Kura server can search."""

    def registered(self) -> list[dict[str, str]]:
        """``[{"db": name, "createAt": rfc3339}]`` in registration order."""

    def loaded(self) -> list[str]:
        """Names that are open and searchable now."""

    def reader(self, name: str) -> Store | None:
        """The open store of ``name``, or None if it is not loaded."""

    def problem(self, name: str) -> str | None:
        """Why a registered database is not loaded (None if unknown or fine)."""


class KuraSearch:
    """Validation and result shaping shared by MCP and the HTTP API."""

    def __init__(self, catalog: KuraCatalog):
        self.catalog = catalog

    def list_rag(self) -> dict[str, Any]:
        return {"loaded": list(self.catalog.loaded()), "registered": list(self.catalog.registered())}

    def search_rag(self, db: Any, q: Any, limit: Any = None, mode: Any = None) -> dict[str, Any]:
        # Both fields are judged before either is refused, and the problems joined, as the MCP
        # surface's argument check does: every surface answers the same.
        problems = []
        for field, value in (("db", db), ("q", q)):
            try:
                _required_text(field, value)
            except InvalidArgument as exc:
                problems.append(str(exc).removeprefix("invalid argument: "))
        if problems:
            raise InvalidArgument("invalid argument: " + "; ".join(problems))
        name, query = _required_text("db", db), _required_text("q", q)
        n = parse_limit(limit)
        parse_mode(mode)
        store = self.catalog.reader(name)
        if store is None:
            problem = self.catalog.problem(name)
            if problem:
                raise InvalidArgument(f'invalid argument: "{name}" not loaded: {problem}')
            raise InvalidArgument(f'invalid argument: "{name}" not exist')
        try:
            hits = kura_store.search(store, query, n)
        except sqlite3.Error as exc:
            raise DatabaseUnavailable(f'database "{name}" cannot be read: {exc}') from exc
        return group_hits(hits)


def _required_text(field: str, value: Any) -> str:
    if value is None:
        raise InvalidArgument(f"invalid argument: {field} is required")
    if not isinstance(value, str):
        raise InvalidArgument(f"invalid argument: {field} must be a string")
    value = value.strip()
    if not value:
        raise InvalidArgument(f"invalid argument: {field} is required")
    return value


def parse_limit(value: Any) -> int:
    """1..100; anything missing, malformed or out of range means the default (10)."""
    if value is None or isinstance(value, bool):
        return DEFAULT_LIMIT
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return DEFAULT_LIMIT
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return DEFAULT_LIMIT
    if not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        return DEFAULT_LIMIT
    return value


def parse_mode(value: Any) -> str:
    if value is None:
        return "keyword"
    if isinstance(value, str):
        mode = value.strip().lower()
        if mode == "":
            return "keyword"
        if mode in MODES:
            return mode
        raise InvalidArgument(f'invalid argument: mode {json.dumps(value)} not supported (only "keyword")')
    raise InvalidArgument("invalid argument: mode must be a string")  # as the other fields say it


def group_hits(hits: list[kura_store.Hit]) -> dict[str, Any]:
    """Hits (best first) -> the Kura result shape; ``{}`` when there are none."""
    if not hits:
        return {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for hit in hits:  # dicts keep insertion order: a source sits where its best chunk ranked
        groups.setdefault(hit.source, []).append({"chunk": hit.chunk, "content": hit.content})
    return {"keyword": [{"source": source, "matches": matches} for source, matches in groups.items()]}


__all__ = [
    "InvalidArgument", "DatabaseUnavailable", "KuraCatalog", "KuraSearch",
    "parse_limit", "parse_mode", "group_hits", "DEFAULT_LIMIT", "MAX_LIMIT", "MODES",
]
