"""How an error names the JSON type of a value it did not expect ("must be an integer, got
null"): one wording for the MCP tools' own checks and for the arguments the MCP SDK rejects,
in every product; and how much of a user's value an error repeats."""

from __future__ import annotations

# What an error repeats of an argument it refuses (a path, a name, a value): a user's input can be
# any length (a 100 KB path must not come back as a 100 KB message).
ECHO_CHARS = 200


def echoed(text: str, *, quoted: bool = False, limit: int = ECHO_CHARS) -> str:
    """``text`` as an error repeats it (in quotes as ``repr`` writes them when ``quoted``): past
    ``limit`` characters it is cut there and its length said, ``'abc...'... (100,000 characters)``."""
    if len(text) <= limit:
        return repr(text) if quoted else text
    head = text[:limit]
    return f"{repr(head) if quoted else head}... ({len(text):,} characters)"


def json_type(value: object) -> str:
    """The JSON type of a decoded value, with its article ("an integer"), or the literal for
    null and booleans ("null", "true")."""
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
