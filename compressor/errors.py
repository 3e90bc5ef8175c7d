"""Typed errors of the compressor; their messages are safe to show a user."""


class QueryError(ValueError):
    """The query or its parameters are not usable; the message says why."""


def printable(text: str) -> str:
    """``text`` as a message may echo it: each unprintable character (NUL, a newline, a
    terminal escape, ...) escaped as ``repr`` escapes it (``\\x00``), the rest as is; as
    the proxy's access log shows a request path."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


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
