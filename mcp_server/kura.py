"""The Kura-compatible MCP server (``kuradb``): ``list_rag`` and ``search_rag``.

One definition serves every transport (stdio for ``kura mcp``; Streamable
HTTP and SSE inside the Kura daemon, mounted with :class:`~mcp_server.http.MCPHttp`),
and the daemon's HTTP API calls the same :class:`KuraSearch`, so a search
answers identically everywhere.

Which databases exist and how they are opened is the host's business: it
passes a :class:`KuraCatalog` (the daemon's live set of watched databases, or
the stdio process's read-only set).
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, WithJsonSchema

from memstrata.storage import Store
from memstrata.storage import kura_store

from .arguments import PlainMCPServer

SERVER_NAME = "kuradb"
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MODES = ("keyword",)

INSTRUCTIONS = (
    "kuradb searches local document databases (folders of notes, documents and code that the "
    "user registered with Kura) by keyword. If you do not know the database name, call list_rag "
    "first, then call search_rag with that name and a few space-separated keywords. The server "
    "stores only the indexed files: it keeps no conversation history and no session memory, so "
    "nothing you send is remembered."
)
LIST_RAG = (
    "List the Kura databases: 'loaded' are the names that can be searched now, 'registered' "
    "every database with its creation time (RFC 3339, UTC)."
)
SEARCH_RAG = (
    "Keyword search in one Kura database. Returns {\"keyword\": [{\"source\", \"matches\": "
    "[{\"chunk\", \"content\"}]}]}, grouped by source file with the best source first; {} when "
    "nothing matches. Identifiers match by their parts (parse_args, ParseArgs ~ parse args)."
)


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
        name = _required_text("db", db)
        query = _required_text("q", q)
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
    shown = json.dumps(value) if isinstance(value, str) else json.dumps(str(value))
    raise InvalidArgument(f'invalid argument: mode {shown} not supported (only "keyword")')


def group_hits(hits: list[kura_store.Hit]) -> dict[str, Any]:
    """Hits (best first) -> the Kura result shape; ``{}`` when there are none."""
    if not hits:
        return {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for hit in hits:  # dicts keep insertion order: a source sits where its best chunk ranked
        groups.setdefault(hit.source, []).append({"chunk": hit.chunk, "content": hit.content})
    return {"keyword": [{"source": source, "matches": matches} for source, matches in groups.items()]}


# -- the MCP server -------------------------------------------------------------

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                             open_world_hint=False)
# db and q are plain strings: the SDK then passes "2024" through as typed
# (for other annotations it JSON-decodes string arguments first), and a
# missing or non-string value is worded by PlainMCPServer in Kura's style.
# limit and mode are accepted as anything, so a bad value gets the documented
# fallback or Kura's own sentence.  Defaults are the documented ones, so the
# schema never says "default": null.
DbArg = Annotated[str, Field(description="Database name (see list_rag).")]
QArg = Annotated[str, Field(description="Space-separated keywords.")]
LimitArg = Annotated[Any, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                                          "description": "Most matches to return (1-100, default 10)."})]
ModeArg = Annotated[Any, WithJsonSchema({"type": "string", "enum": list(MODES),
                                         "description": "Search mode; only \"keyword\"."})]


def _result(payload: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
                          structured_content=payload)


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def build_kura_server(search: KuraSearch, *, version: str = "") -> MCPServer:
    """An ``MCPServer`` named ``kuradb`` answering from ``search``.  Configure
    logging before calling this (the SDK configures it otherwise)."""
    server = PlainMCPServer(SERVER_NAME, version=version, instructions=INSTRUCTIONS, log_level="WARNING",
                            argument_prefix="invalid argument: ")

    def list_rag() -> dict[str, Any]:
        return _result(search.list_rag())  # type: ignore[return-value]

    def search_rag(db: DbArg, q: QArg, limit: LimitArg = DEFAULT_LIMIT,
                   mode: ModeArg = MODES[0]) -> dict[str, Any]:
        try:
            return _result(search.search_rag(db, q, limit, mode))  # type: ignore[return-value]
        except InvalidArgument as exc:
            return _error(str(exc))  # type: ignore[return-value]

    server.add_tool(list_rag, description=LIST_RAG, annotations=_READ_ONLY, structured_output=True)
    server.add_tool(search_rag, description=SEARCH_RAG, annotations=_READ_ONLY, structured_output=True)
    return server


__all__ = [
    "SERVER_NAME", "INSTRUCTIONS", "InvalidArgument", "DatabaseUnavailable", "KuraCatalog", "KuraSearch", "build_kura_server",
    "parse_limit", "parse_mode", "group_hits", "DEFAULT_LIMIT", "MAX_LIMIT",
]
