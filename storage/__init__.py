"""The embedded SQLite store every MemStrata surface shares.

Public face: :class:`Store` (connection, transactions, schema migrations,
meta), :class:`StoreError`, the code-index reads/writes in
:mod:`storage.code_index`, and identifier-aware text helpers in
:mod:`storage.text`.
"""

from .db import Store, StoreError
from .schema import SCHEMA_VERSION

__all__ = ["Store", "StoreError", "SCHEMA_VERSION"]
