"""Migration chains: each kind of database file carries its own schema history.

A :class:`Schema` names one chain (MemStrata's code index, a Kura database, a
Strata database, a Stormbuffer projection): the SQL of each forward step and
the ``PRAGMA application_id`` that marks a file as belonging to it.  The
version a file is at lives in ``PRAGMA user_version``; each step runs in one
write transaction, so a killed process leaves the file at a whole version.

Before the products had chains of their own, every file was written by one
shared chain (application id 0), so every file carried every product's
tables.  A product chain *adopts* such a file the first time it opens it:
the foreign tables (always empty: no other product ever opened that file)
are dropped, the file is marked as the product's, and its version is mapped
onto the product's chain.  Data the product wrote is never touched.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

LEGACY_APPLICATION_ID = 0

# Every chain's first step creates the key/value table ``meta`` (Store's
# get_meta/set_meta read it); IF NOT EXISTS, because a file adopted from the
# shared chain already has it.
META_TABLE = """
    CREATE TABLE IF NOT EXISTS meta (
        key   TEXT PRIMARY KEY,
        value TEXT
    );
"""


@dataclass(frozen=True, slots=True)
class LegacyAdoption:
    """How a product chain takes over a file written by the shared chain.

    ``owns`` are the table-name prefixes the product's tables start with;
    ``since`` the shared-chain version whose step created them, and
    ``version`` the product-chain version such a file then is at.  ``meta``
    (the key/value table every chain has) is always kept.
    """

    owns: tuple[str, ...]
    since: int
    version: int


@dataclass(frozen=True, slots=True)
class Schema:
    name: str                       # what a file of this chain is, for messages
    application_id: int
    migrations: tuple[str, ...]
    legacy: LegacyAdoption | None = None

    @property
    def version(self) -> int:
        return len(self.migrations)


class SchemaMismatch(Exception):
    """The file belongs to another chain (another product's database)."""


def adopt_legacy(conn: sqlite3.Connection, schema: Schema) -> None:
    """Inside a write transaction: make a shared-chain file this chain's own.

    Does nothing to a file already marked, or to a new empty one.
    """
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if app_id == schema.application_id:
        return
    if app_id != LEGACY_APPLICATION_ID:
        raise SchemaMismatch(f"the file is not a {schema.name}")
    if version == 0:
        conn.execute(f"PRAGMA application_id = {schema.application_id}")
        return
    legacy = schema.legacy
    if legacy is None:
        # The core chain continues the shared chain's numbering; it drops
        # the products' tables in a step of its own.
        conn.execute(f"PRAGMA application_id = {schema.application_id}")
        return
    _drop_foreign_tables(conn, legacy.owns)
    conn.execute("DELETE FROM meta WHERE key = 'code_generation'")
    conn.execute(f"PRAGMA user_version = {legacy.version if version >= legacy.since else 0}")
    conn.execute(f"PRAGMA application_id = {schema.application_id}")


def _drop_foreign_tables(conn: sqlite3.Connection, owns: tuple[str, ...]) -> None:
    def foreign(name: str) -> bool:
        return name != "meta" and not name.startswith("sqlite_") and not name.startswith(owns)

    # Virtual tables first: dropping one drops its shadow tables with it.
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    for name, sql in rows:
        if foreign(name) and (sql or "").upper().startswith("CREATE VIRTUAL TABLE"):
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    for (name,) in rows:
        if foreign(name):
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')
    # Triggers go with their tables; a trigger of ours on a dropped table cannot exist.
