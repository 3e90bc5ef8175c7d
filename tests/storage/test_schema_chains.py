"""Each kind of database file has its own migration chain, and files written
before the split (one shared chain, every product's tables in every file)
keep working: MemStrata's index drops the empty product tables, a product's
file drops everyone else's, and no row a program wrote is lost."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memstrata.kura import store as kura_store
from memstrata.kura.schema import KURA_SCHEMA
from memstrata.storage import CORE_SCHEMA, Store, StoreError, StoreForeign
from memstrata.storage.db import _split_sql
from memstrata.stormbuffer import index_db
from memstrata.stormbuffer.schema import STORMBUFFER_SCHEMA
from memstrata.strata.schema import STRATA_SCHEMA
from memstrata.strata.store import DB_FILE, StrataStore

PRODUCT_PREFIXES = ("kura_", "strata_", "sbuf_")


def _without_meta(sql: str) -> str:
    return sql.replace("CREATE TABLE IF NOT EXISTS meta", "CREATE TABLE IF NOT EXISTS meta_unused", 1)


def legacy_file(path: Path) -> None:
    """A file as the shared chain left it at version 7: every table, application id 0."""
    steps = list(CORE_SCHEMA.migrations[:7])
    steps[2] = _without_meta(KURA_SCHEMA.migrations[0])
    steps[3] = _without_meta(STRATA_SCHEMA.migrations[0])
    steps[5] = _without_meta(STORMBUFFER_SCHEMA.migrations[0])
    conn = sqlite3.connect(path)
    for step in steps:
        for statement in _split_sql(step):
            conn.execute(statement)
    conn.execute("DROP TABLE IF EXISTS meta_unused")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()


def tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def pragma(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


def test_a_legacy_index_keeps_its_rows_and_drops_the_product_tables(tmp_path):
    db = tmp_path / "index.db"
    legacy_file(db)
    assert {"kura_chunks", "strata_entries", "sbuf_records", "files"} <= tables(db)
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO files(path, size, mtime_ns, hash, status, indexed_at) VALUES ('a.py', 1, 1, 'h', 'ok', 0)")
    conn.commit()
    conn.close()

    with Store(db) as store:
        assert store.user_version == CORE_SCHEMA.version
        assert store.execute("SELECT path FROM files")[0][0] == "a.py"
    names = tables(db)
    assert not [n for n in names if n.startswith(PRODUCT_PREFIXES)]
    assert {"files", "symbols", "symbols_fts", "ledger", "meta"} <= names
    assert pragma(db, "application_id") == CORE_SCHEMA.application_id


def test_a_new_index_has_no_product_tables(tmp_path):
    with Store(tmp_path / "index.db"):
        pass
    assert not [n for n in tables(tmp_path / "index.db") if n.startswith(PRODUCT_PREFIXES)]


def test_a_legacy_strata_database_opens_with_its_data(tmp_path):
    folder = tmp_path / "db"
    folder.mkdir()
    legacy_file(folder / DB_FILE)
    store = StrataStore.open(folder)
    store.close()
    # Reopen: the adopted file carries Strata's mark and chain.
    store = StrataStore.open(folder)
    assert store.store.user_version == STRATA_SCHEMA.version
    store.close()
    names = tables(folder / DB_FILE)
    assert {"strata_entries", "strata_commits", "meta"} <= names
    assert not ({"files", "symbols", "ledger", "kura_chunks", "sbuf_records"} & names)
    assert pragma(folder / DB_FILE, "application_id") == STRATA_SCHEMA.application_id


def test_a_legacy_kura_database_keeps_its_chunks(tmp_path):
    db = tmp_path / "data.db"
    legacy_file(db)
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO kura_sources(path, size, mtime_ns, hash, kind, chunks, indexed_at) "
                 "VALUES ('notes.md', 1, 1, 'h', 'prose', 1, 0)")
    conn.execute("INSERT INTO kura_chunks(source_id, chunk, content, idents) VALUES (1, 1, 'the walrus diary', '')")
    conn.execute("INSERT INTO kura_fts(rowid, content, idents) VALUES (1, 'the walrus diary', '')")
    conn.commit()
    conn.close()
    with Store(db, schema=KURA_SCHEMA) as store:
        hits = kura_store.search(store, "walrus", 5)
        assert [h.source for h in hits] == ["notes.md"]
    names = tables(db)
    assert not ({"files", "symbols", "ledger", "strata_entries", "sbuf_records"} & names)


def test_a_legacy_stormbuffer_projection_is_adopted(tmp_path):
    db = tmp_path / "index.sqlite3"
    legacy_file(db)
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO meta(key, value) VALUES (?, '1')", (index_db.MARKER_KEY,))
    conn.commit()
    conn.close()
    store = index_db.open_projection(db)
    assert store.user_version == STORMBUFFER_SCHEMA.version
    store.close()
    names = tables(db)
    assert {"sbuf_files", "sbuf_records", "sbuf_fts"} <= names
    assert not ({"files", "ledger", "strata_entries", "kura_chunks"} & names)


def test_another_chains_file_is_refused_not_damaged(tmp_path):
    folder = tmp_path / "db"
    StrataStore.open(folder).close()
    before = tables(folder / DB_FILE)
    with pytest.raises(StoreForeign, match="is not a MemStrata index"):
        Store(folder / DB_FILE)
    assert tables(folder / DB_FILE) == before


def test_a_foreign_file_at_the_projection_path_is_replaced(tmp_path):
    db = tmp_path / "index.sqlite3"
    with Store(db, schema=KURA_SCHEMA):
        pass
    index_db.open_projection(db).close()
    assert pragma(db, "application_id") == STORMBUFFER_SCHEMA.application_id


def test_a_newer_product_file_is_refused_with_its_name(tmp_path):
    db = tmp_path / "data.db"
    with Store(db, schema=KURA_SCHEMA):
        pass
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="Kura database schema v99 is newer"):
        Store(db, schema=KURA_SCHEMA)
