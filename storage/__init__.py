"""The embedded SQLite store every MemStrata surface shares.

Public face: :class:`Store` (connection, transactions, schema migrations,
meta), :class:`StoreError` (with :class:`StoreFull` and :class:`StoreReadOnly` for failed writes,
:class:`StoreCorrupt` for a damaged file, :class:`StoreBusy` for a write that would not wait), the code-index reads/writes in
:mod:`storage.code_index`, and identifier-aware text helpers in
:mod:`storage.text`.
"""

from .db import Store, StoreBusy, StoreCorrupt, StoreError, StoreFull, StoreReadOnly
from .schema import SCHEMA_VERSION

__all__ = ["Store", "StoreBusy", "StoreCorrupt", "StoreError", "StoreFull", "StoreReadOnly", "SCHEMA_VERSION"]
