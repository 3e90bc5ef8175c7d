"""Question + token budget -> a dependency-aware context slice.

Public face: :func:`context_query`, :class:`ContextSlice`, :class:`QueryError`,
and :func:`count_tokens` (exact cl100k counts, offline).
"""

from .errors import QueryError
from .slice import ContextSlice, context_query
from .tokens import count_tokens

__all__ = ["ContextSlice", "QueryError", "context_query", "count_tokens"]
