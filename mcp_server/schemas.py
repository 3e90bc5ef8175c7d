"""Tool results as typed dicts: the SDK turns them into each tool's ``outputSchema``
and checks every successful result against it before it is sent.

Field names and types are the API reference's; descriptions live in
:mod:`mcp_server.texts` so that an agent reads them once, in the tool
description.
"""

from __future__ import annotations

from typing import Literal, TypedDict


class ContextQueryResult(TypedDict):
    context: str
    tokens: int
    baseline_tokens: int
    sources: list[str]


class IndexStatusResult(TypedDict):
    project: str
    files_indexed: int
    last_indexed: str | None
    index_size_mb: float
    status: Literal["ready", "indexing", "stale", "error"]


class SavingsSummaryResult(TypedDict):
    session_tokens_saved: int | None
    session_dollar_saved: float | None
    cycle_tokens_saved: int | None
    cycle_dollar_saved: float | None
    provider_rate_per_token: float | None
    recall: float | None
    precision: float | None


SAVINGS_FIELDS: tuple[str, ...] = tuple(SavingsSummaryResult.__annotations__)
