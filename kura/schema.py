"""Schema of a Kura database file (its own migration chain; storage/migrations.py)."""

from __future__ import annotations

from memstrata.storage.migrations import META_TABLE, LegacyAdoption, Schema

KURA_SCHEMA = Schema(
    name="Kura database",
    application_id=0x4B555241,  # "KURA"
    migrations=(
        # 1: the tables (step 3 of the shared chain before the products had their own files).
        META_TABLE + """
    CREATE TABLE kura_sources (
        id          INTEGER PRIMARY KEY,
        path        TEXT NOT NULL UNIQUE,      -- relative to the watched folder, POSIX
        size        INTEGER NOT NULL,
        mtime_ns    INTEGER NOT NULL,
        hash        TEXT NOT NULL,             -- blake2b of the raw bytes
        kind        TEXT NOT NULL,             -- prose | table | code:<language>
        chunks      INTEGER NOT NULL,
        indexed_at  REAL NOT NULL
    );

    -- Chunks are numbered from 1 within their source.  idents holds the split
    -- parts of the CamelCase identifiers in content (storage/text.py), so the
    -- search index sees "AuthService" as authservice + auth + service.
    CREATE TABLE kura_chunks (
        id         INTEGER PRIMARY KEY,
        source_id  INTEGER NOT NULL REFERENCES kura_sources(id),
        chunk      INTEGER NOT NULL,
        content    TEXT NOT NULL,
        idents     TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX kura_chunks_source ON kura_chunks(source_id, chunk);

    -- External content: the text lives once, in kura_chunks; kura/store.py keeps
    -- the two in step inside each write transaction.  No stemmer (keywords
    -- match as typed, variants through prefix queries); detail=full keeps
    -- positions for phrase matches; prefix=3 makes "abc*" a single lookup.
    CREATE VIRTUAL TABLE kura_fts USING fts5(
        content, idents,
        content = 'kura_chunks', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 2',
        prefix = '3'
    );
    INSERT INTO kura_fts(kura_fts, rank) VALUES ('rank', 'bm25(1.0, 0.5)');
    """,
    ),
    legacy=LegacyAdoption(owns=("kura_",), since=3, version=1),
)
