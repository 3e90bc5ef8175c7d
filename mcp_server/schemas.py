"""Tool results as typed dicts: the SDK turns them into each tool's ``outputSchema``
and checks every successful result against it before it is sent.

Field names and types are the API reference's; descriptions live in
:mod:`mcp_server.texts` so that an agent reads them once, in the tool
description.
"""

from __future__ import annotations

from typing import Literal, TypedDict

# Results that nest typed dicts need typing_extensions' TypedDict on Python < 3.12 (pydantic's rule).
from typing_extensions import NotRequired
from typing_extensions import TypedDict as NestedTypedDict


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


class SymbolEntry(NestedTypedDict):
    symbol: str
    kind: str
    path: str
    start_line: int
    end_line: int
    signature: str
    body: NotRequired[str]


class FindSymbolResult(NestedTypedDict):
    symbols: list[SymbolEntry]
    truncated: bool


class ReferenceEntry(NestedTypedDict):
    path: str
    line: int
    symbol: str | None
    kind: Literal["call", "type", "import", "inherit", "other"]
    snippet: str


class FindReferencesResult(NestedTypedDict):
    symbol: str
    references: list[ReferenceEntry]
    truncated: bool
    unattributed: int


class OutlineEntry(NestedTypedDict):
    symbol: str
    kind: str
    start_line: int
    end_line: int
    signature: str
    children: list["OutlineEntry"]


class FileOutlineResult(NestedTypedDict):
    path: str
    language: str | None
    symbols: list[OutlineEntry]
    deeper: int  # definitions nested below ``depth``, not listed
