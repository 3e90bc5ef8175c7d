"""How an error names the JSON type of a value it did not expect ("must be an integer, got
null"): one wording for the MCP tools' own checks and for the arguments the MCP SDK rejects,
in every product."""

from __future__ import annotations


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
