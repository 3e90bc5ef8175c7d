"""The embedded SQLite store every MemStrata surface shares.

Public face: :class:`Store` (connection, transactions, schema migrations,
meta), :class:`StoreError` (with :class:`StoreFull` and :class:`StoreReadOnly` for failed writes,
:class:`StoreCorrupt` for a damaged file, :class:`StoreForeign` for another chain's file,
:class:`StoreBusy` for a write that would not wait), :class:`Schema` (a migration chain:
:data:`CORE_SCHEMA` is MemStrata's index, each product declares its own), atomic
writes (:mod:`storage.files`), checked files (:mod:`storage.checked_file`),
identifier-aware text helpers (:mod:`storage.text`), and MemStrata's own
tables: the code index (:mod:`storage.code_index`, and the navigation reads
of :mod:`storage.code_nav`) and the savings ledger (:mod:`storage.ledger`).
Those two also live on a PostgreSQL server for a team (:mod:`storage.postgres`:
``PgStore``, the same API; imported only when a ``postgresql://`` store is named).
"""

from .db import Store, StoreBusy, StoreCorrupt, StoreError, StoreForeign, StoreFull, StoreReadOnly
from .migrations import LegacyAdoption, Schema
from .schema import CORE_SCHEMA, SCHEMA_VERSION

__all__ = ["Store", "StoreBusy", "StoreCorrupt", "StoreError", "StoreForeign", "StoreFull", "StoreReadOnly",
           "Schema", "LegacyAdoption", "CORE_SCHEMA", "SCHEMA_VERSION"]
