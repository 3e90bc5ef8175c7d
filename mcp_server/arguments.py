"""Tool arguments the SDK rejects, told in one plain sentence.

The SDK validates a tool call's arguments against the function signature and,
when they do not fit, answers with pydantic's multi-line dump (with an
``errors.pydantic.dev`` link) as the tool's error text.  An agent reads that
text; :class:`PlainMCPServer` replaces it with what went wrong, naming each
argument: ``query is required``, ``query must be a string, got an integer`` (or ``got null``).

Every MCP server of the project is built on :class:`PlainMCPServer` instead
of ``MCPServer``; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import ValidationError

from memstrata.storage.json_types import echoed, json_type

_EXPECTED = {
    "string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
    "array": "an array", "object": "an object", "null": "null",
}


def describe_problem(error: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """One pydantic error on a tool's arguments as a clause naming the argument."""
    loc = [str(part) for part in error.get("loc", ())]
    name = ".".join(loc) or "the arguments"
    if error.get("type") == "missing":
        return f"{name} is required"
    declared = (schema.get("properties") or {}).get(loc[0], {}) if loc else {}
    expected = _EXPECTED.get(declared.get("type")) if isinstance(declared, Mapping) else None
    if expected is not None and str(error.get("type", "")).endswith(("_type", "_parsing")):
        return f"{name} must be {expected}, got {json_type(error.get('input'))}"
    if error.get("input") is None and loc and loc[0] in schema.get("required", ()):
        return f"{name} is required, got null"
    # Constraints (ranges, enums, ...): pydantic's own one-line message, minus its link.
    message = str(error.get("msg", "is not valid")).split("\n", 1)[0]
    return f"{name}: {message[:1].lower()}{message[1:]}"


def describe_argument_errors(errors: list[Mapping[str, Any]], schema: Mapping[str, Any]) -> str:
    clauses = list(dict.fromkeys(describe_problem(e, schema) for e in errors))
    return "; ".join(clauses) or "the arguments are not valid"


class PlainMCPServer(MCPServer):
    """``MCPServer`` whose argument-validation failures read as one sentence.

    ``argument_prefix`` starts every such sentence (Kura's errors begin with
    ``invalid argument: ``).  Failures raised by the tools themselves, unknown
    tools and crashes are left exactly as the SDK reports them.
    """

    def __init__(self, *args: Any, argument_prefix: str = "", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.argument_prefix = argument_prefix

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        if self._tool_manager.get_tool(name) is None:
            # The SDK's own refusal, repeating at most ECHO_CHARS of the name (a caller's name can
            # be any length).
            raise ToolError(f"Unknown tool: {echoed(name)}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            # The SDK's own test for "the caller's arguments did not fit": a
            # ValidationError behind an UnexpectedToolError is a crash instead.
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            schema = await self._input_schema(name)
            sentence = describe_argument_errors(cause.errors(include_url=False), schema)
            raise ToolError(self.argument_prefix + sentence) from None

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Context[Any, Any] | None = None) -> Any:
        # A prompt name the server does not have is the caller's mistake: MCP says -32602
        # (as for an unknown resource).  The SDK raises a bare ValueError, which goes out as
        # error code 0 with a traceback on stderr.
        if self._prompt_manager.get_prompt(name) is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {echoed(name)}")
        return await super().get_prompt(name, arguments, context)

    async def _input_schema(self, name: str) -> Mapping[str, Any]:
        for tool in await self.list_tools():
            if tool.name == name:
                return tool.input_schema
        return {}


__all__ = ["PlainMCPServer", "describe_argument_errors", "describe_problem", "json_type"]
