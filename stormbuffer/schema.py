"""Schema of a Stormbuffer projection file (its own migration chain; storage/migrations.py).

The projection of one store's Markdown records: the Markdown is the source
of truth, so these tables can be dropped and rebuilt at will."""

from __future__ import annotations

from memstrata.storage.migrations import META_TABLE, LegacyAdoption, Schema

STORMBUFFER_SCHEMA = Schema(
    name="Stormbuffer index",
    application_id=0x53425546,  # "SBUF"
    migrations=(
        # 1: the tables (step 6 of the shared chain before the products had their own files).
        META_TABLE + """
    -- One row per *.md file below records/, valid or not.  The stat fields
    -- let a sync skip unchanged files without reading them; racy = 1 when the
    -- file was read so soon after its last write that its stat cannot be
    -- trusted next time (the next sync re-hashes it).
    CREATE TABLE sbuf_files (
        id        INTEGER PRIMARY KEY,
        path      TEXT NOT NULL UNIQUE,         -- relative to records/, POSIX
        size      INTEGER NOT NULL,
        mtime_ns  INTEGER NOT NULL,
        ctime_ns  INTEGER NOT NULL,
        inode     INTEGER NOT NULL,
        racy      INTEGER NOT NULL DEFAULT 0,
        hash      TEXT NOT NULL,                -- blake2b of the raw bytes
        error     TEXT,                         -- why the file is invalid; NULL = valid
        seq       INTEGER NOT NULL              -- transaction counter: other processes reload only newer rows
    );
    CREATE INDEX sbuf_files_invalid ON sbuf_files(path) WHERE error IS NOT NULL;
    CREATE INDEX sbuf_files_seq ON sbuf_files(seq);

    -- The parsed record of each valid file.  Lists are JSON arrays; the two
    -- norm_* columns serve the duplicate and conflict checks of proposals.
    CREATE TABLE sbuf_records (
        file_id     INTEGER PRIMARY KEY REFERENCES sbuf_files(id) ON DELETE CASCADE,
        id          TEXT NOT NULL,              -- the record uuid (not unique: duplicates are an error state)
        title       TEXT NOT NULL,
        kind        TEXT NOT NULL,
        scope       TEXT NOT NULL,
        status      TEXT NOT NULL,
        access      TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL,
        tags        TEXT NOT NULL,
        aliases     TEXT NOT NULL,
        supersedes  TEXT NOT NULL,
        sources     TEXT NOT NULL,
        body        TEXT NOT NULL,
        norm_title  TEXT NOT NULL,
        norm_body   TEXT NOT NULL               -- digest of the whitespace-folded, lower-cased body
    );
    CREATE INDEX sbuf_records_id ON sbuf_records(id);
    CREATE INDEX sbuf_records_overlap ON sbuf_records(scope, kind, norm_title);

    -- Retrieval chunks of each record: text is what a context block quotes,
    -- retrieval what the full-text index sees (title, headings, aliases,
    -- tags and file name before the text).
    CREATE TABLE sbuf_chunks (
        id         INTEGER PRIMARY KEY,
        file_id    INTEGER NOT NULL REFERENCES sbuf_files(id) ON DELETE CASCADE,
        ordinal    INTEGER NOT NULL,
        text       TEXT NOT NULL,
        retrieval  TEXT NOT NULL
    );
    CREATE INDEX sbuf_chunks_file ON sbuf_chunks(file_id, ordinal);

    -- External content over sbuf_chunks.retrieval; stormbuffer/index_db.py keeps the
    -- two in step.  No stemmer and diacritics kept: Stormbuffer's tokenizer.
    CREATE VIRTUAL TABLE sbuf_fts USING fts5(
        retrieval,
        content = 'sbuf_chunks', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 0'
    );
    -- Per-token document counts: a query clause whose token is in at least
    -- half the chunks has its BM25 weight clamped to 1e-6 by FTS5, so search
    -- need not score it (stormbuffer/index_db.py).
    CREATE VIRTUAL TABLE sbuf_fts_vocab USING fts5vocab(sbuf_fts, 'row');
    """,
    ),
    legacy=LegacyAdoption(owns=("sbuf_",), since=6, version=1),
)
