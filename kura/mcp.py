"""The Kura-compatible MCP server (``kuradb``): ``list_rag`` and ``search_rag``.

One definition serves every transport (stdio for ``kura mcp``; Streamable
HTTP and SSE inside the Kura daemon, mounted with :class:`~mcp_server.http.MCPHttp`);
both tools answer through :class:`~.search.KuraSearch`, as the HTTP API does.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, WithJsonSchema

from memstrata.mcp_server.arguments import PlainMCPServer
from .search import DEFAULT_LIMIT, MAX_LIMIT, MODES, InvalidArgument, KuraSearch

SERVER_NAME = "kuradb"

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
# The mode is case-insensitive ("Keyword" is valid): an enum would have a host that checks
# arguments against the schema refuse it, so a pattern spells every casing of each mode.
ModeArg = Annotated[Any, WithJsonSchema({
    "type": "string",
    "pattern": "^(" + "|".join("".join(f"[{c.lower()}{c.upper()}]" for c in m) for m in MODES) + ")$",
    "description": "Search mode; only \"keyword\" (any casing)."})]


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


__all__ = ["SERVER_NAME", "INSTRUCTIONS", "build_kura_server"]
