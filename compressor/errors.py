"""Typed errors of the compressor; their messages are safe to show a user."""


class QueryError(ValueError):
    """The query or its parameters are not usable; the message says why."""


def json_type(value: object) -> str:
    """What a wrong-typed argument was, the way an error names it ("must be an integer, got
    null"): its JSON type with an article, or the literal for null and booleans. Worded as
    ``mcp_server.arguments.json_type`` words the arguments the MCP SDK rejects."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    return "an object"
