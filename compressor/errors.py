"""Typed errors of the compressor; their messages are safe to show a user."""

from memstrata.storage.json_types import echoed, json_type

__all__ = ["QueryError", "echoed", "json_type", "printable"]


class QueryError(ValueError):
    """The query or its parameters are not usable; the message says why."""


def printable(text: str) -> str:
    """``text`` as a message may echo it: each unprintable character (NUL, a newline, a
    terminal escape, ...) escaped as ``repr`` escapes it (``\\x00``), the rest as is; as
    the proxy's access log shows a request path."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
