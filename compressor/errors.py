"""Typed errors of the compressor; their messages are safe to show a user."""


class QueryError(ValueError):
    """The query or its parameters are not usable; the message says why."""
