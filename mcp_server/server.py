"""The MemStrata MCP server: the three documented tools and three navigation
tools on the SDK's ``MCPServer``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field, WithJsonSchema

from memstrata import __version__
from memstrata.indexer.workspace import Workspace

from . import texts
from .arguments import PlainMCPServer
from .schemas import (
    ContextQueryResult,
    FileOutlineResult,
    FindReferencesResult,
    FindSymbolResult,
    IndexStatusResult,
    SavingsSummaryResult,
)
from .quiet import QuestionGate
from .tools import DEFAULT_READY_TIMEOUT, MemStrataTools, SavingsProvider, UnavailableTools
from .warmup import IndexWarmup

TOOL_NAMES = ("context_query", "index_status", "savings_summary", "find_symbol", "find_references", "file_outline")

# max_tokens and include_tests are advertised with their documented JSON types
# but accepted as anything: the compressor checks them and says what is wrong
# ("max_tokens must be at least 1, got 0").  query stays a plain str, which
# stops the SDK from JSON-decoding queries that happen to look like JSON
# ("null", "[1]"); a missing or non-string query is worded by PlainMCPServer.
MaxTokens = Annotated[Any, WithJsonSchema({"type": "integer"}), Field(description=texts.MAX_TOKENS_ARG)]
IncludeTests = Annotated[Any, WithJsonSchema({"type": "boolean"}), Field(description=texts.INCLUDE_TESTS_ARG)]
Query = Annotated[str, Field(description=texts.QUERY_ARG)]
# The navigation tools' arguments follow the same rule: names stay plain
# strings, the rest is checked (and worded) by compressor.navigation.
Name = Annotated[str, Field(description=texts.NAME_ARG)]
SymbolArg = Annotated[str, Field(description=texts.SYMBOL_ARG)]
IncludeBody = Annotated[Any, WithJsonSchema({"type": "boolean"}), Field(description=texts.INCLUDE_BODY_ARG)]
Kind = Annotated[Any, WithJsonSchema({"type": ["string", "null"]}), Field(description=texts.KIND_ARG)]
PathFilter = Annotated[Any, WithJsonSchema({"type": ["string", "null"]}), Field(description=texts.PATH_ARG)]
MaxResults = Annotated[Any, WithJsonSchema({"type": "integer"}), Field(description=texts.MAX_RESULTS_ARG)]
OutlinePath = Annotated[str, Field(description=texts.OUTLINE_PATH_ARG)]
Depth = Annotated[Any, WithJsonSchema({"type": "integer"}), Field(description=texts.DEPTH_ARG)]

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                             open_world_hint=False)


def build_server(ws: Workspace | None, *, savings: SavingsProvider | None = None,
                 warmup: IndexWarmup | None = None,
                 ready_timeout: float = DEFAULT_READY_TIMEOUT, unavailable: str | None = None) -> MCPServer:
    """An ``MCPServer`` named ``memstrata`` serving ``ws``; with ``unavailable`` (and no ``ws``),
    one whose every tool call answers that sentence (an index that cannot be opened).

    ``savings`` supplies the ``savings_summary`` figures (without it the tool
    answers with an error).  ``warmup``, if given, is started when the first
    session begins, and ``context_query`` waits up to ``ready_timeout``
    seconds for it.  The caller owns ``ws`` and closes it after serving.
    Logging is left to the host: configure it before calling this.
    """
    # The server's own background work (the full graph behind the snapshot,
    # token counts) gives way while a question is answered; the graph it
    # builds is frozen out of the garbage collector's way as it grows.
    gate = QuestionGate()
    tools: MemStrataTools | UnavailableTools
    if unavailable is not None:
        tools = UnavailableTools(unavailable)
    else:
        ws.background_pause = gate.wait_quiet_and_settle
        if warmup is not None:
            warmup.pause = gate.wait_unanswered  # the token counts' steps (see warmup.py)
            gate.follow(warmup.hold_counts, warmup.release_counts)  # ... and those of a child process
        tools = MemStrataTools(ws, savings=savings, warmup=warmup, ready_timeout=ready_timeout, gate=gate)

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        if warmup is not None:
            warmup.start()
        yield {}

    server = PlainMCPServer(
        texts.SERVER_NAME,
        version=__version__,
        instructions=texts.INSTRUCTIONS,
        lifespan=lifespan,
        # Only consulted when the host has not configured logging yet.
        log_level="WARNING",
    )

    def context_query(query: Query, max_tokens: MaxTokens = 4096,
                      include_tests: IncludeTests = False) -> ContextQueryResult:
        return tools.context_query(query, max_tokens, include_tests)  # type: ignore[return-value]

    def index_status() -> IndexStatusResult:
        return tools.index_status()  # type: ignore[return-value]

    def savings_summary() -> SavingsSummaryResult:
        return tools.savings_summary()  # type: ignore[return-value]

    def find_symbol(name: Name, include_body: IncludeBody = False, kind: Kind = None, path: PathFilter = None,
                    max_results: MaxResults = 20) -> FindSymbolResult:
        return tools.find_symbol(name, include_body, kind, path, max_results)  # type: ignore[return-value]

    def find_references(symbol: SymbolArg, max_results: MaxResults = 50) -> FindReferencesResult:
        return tools.find_references(symbol, max_results)  # type: ignore[return-value]

    def file_outline(path: OutlinePath, depth: Depth = 2) -> FileOutlineResult:
        return tools.file_outline(path, depth)  # type: ignore[return-value]

    # The functions return CallToolResult (so errors read cleanly); the return
    # annotations only declare the output schema the SDK enforces on success.
    for fn, description in ((context_query, texts.CONTEXT_QUERY), (index_status, texts.INDEX_STATUS),
                            (savings_summary, texts.SAVINGS_SUMMARY), (find_symbol, texts.FIND_SYMBOL),
                            (find_references, texts.FIND_REFERENCES), (file_outline, texts.FILE_OUTLINE)):
        server.add_tool(fn, description=description, annotations=_READ_ONLY, structured_output=True)
    return server


__all__ = ["build_server", "TOOL_NAMES"]
