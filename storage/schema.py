"""Schema of the MemStrata store and its forward migrations.

The version lives in ``PRAGMA user_version``.  Each migration moves the
schema from version ``n`` to ``n + 1`` inside one transaction; migrations are
append-only, so a store written by an older release opens in a newer one.
This chain is MemStrata's own file, ``.memstrata/index.db``: the code index
and the savings ledger.  The compatible products keep their tables in
database files of their own, each with its own chain (``kura/schema.py``,
``strata/schema.py``, ``stormbuffer/schema.py``; storage/migrations.py).
"""

from __future__ import annotations

from .migrations import Schema

MIGRATIONS: list[str] = [
    # 1: the code index.
    """
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT
    );

    CREATE TABLE files (
        id          INTEGER PRIMARY KEY,
        path        TEXT NOT NULL UNIQUE,          -- project-relative, POSIX
        language    TEXT,
        size        INTEGER NOT NULL,
        mtime_ns    INTEGER NOT NULL,
        hash        TEXT NOT NULL,                 -- blake2b of the raw bytes
        status      TEXT NOT NULL,                 -- ok | syntax_error
        error       TEXT,
        encoding    TEXT NOT NULL DEFAULT 'utf-8', -- how the bytes were decoded
        lines       INTEGER NOT NULL DEFAULT 0,
        is_test     INTEGER NOT NULL DEFAULT 0,
        indexed_at  REAL NOT NULL
    );

    -- The decoded text the symbol spans refer to (byte offsets are into its
    -- UTF-8 encoding), so slices render exactly what was parsed.
    CREATE TABLE file_text (
        file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
        text    TEXT NOT NULL
    );

    CREATE TABLE symbols (
        id          INTEGER PRIMARY KEY,
        file_id     INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        name        TEXT NOT NULL,
        qualname    TEXT NOT NULL,
        kind        TEXT NOT NULL,
        parent      TEXT,
        start_byte  INTEGER NOT NULL,
        end_byte    INTEGER NOT NULL,
        start_line  INTEGER NOT NULL,
        end_line    INTEGER NOT NULL,
        signature   TEXT NOT NULL,
        docstring   TEXT
    );
    CREATE INDEX symbols_file ON symbols(file_id);
    CREATE INDEX symbols_name ON symbols(name);

    CREATE TABLE refs (
        id        INTEGER PRIMARY KEY,
        file_id   INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        scope     TEXT,            -- qualname of the enclosing symbol, NULL = file level
        name      TEXT NOT NULL,
        kind      TEXT NOT NULL,   -- call | type | inherit
        receiver  TEXT,
        line      INTEGER NOT NULL, -- first use
        count     INTEGER NOT NULL DEFAULT 1, -- identical uses from this scope
        target    TEXT             -- 'path::qualname' once resolved
    );
    CREATE INDEX refs_file ON refs(file_id);

    CREATE TABLE imports (
        id           INTEGER PRIMARY KEY,
        file_id      INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        module       TEXT NOT NULL,
        name         TEXT,
        alias        TEXT,
        line         INTEGER NOT NULL,
        target_path  TEXT          -- project file it resolves to, NULL = external
    );
    CREATE INDEX imports_file ON imports(file_id);
    CREATE INDEX imports_target ON imports(target_path);

    -- Files seen but not indexed, and why (binary, too_large, unreadable, ...).
    CREATE TABLE skipped (
        path    TEXT PRIMARY KEY,
        reason  TEXT NOT NULL,
        size    INTEGER
    );

    -- Lexical search over symbols; rowid = symbols.id.
    -- detail=column: BM25 and prefix queries without per-token positions,
    -- which keeps the index a fraction of the size.
    CREATE VIRTUAL TABLE symbols_fts USING fts5(
        name, signature, doc, body,
        tokenize = 'porter unicode61 remove_diacritics 2',
        detail = column
    );
    """,
    # 2: the proxy's savings ledger (storage/ledger.py).
    """
    -- One row per `memstrata serve` process: a ledger "session".
    CREATE TABLE ledger_sessions (
        id       INTEGER PRIMARY KEY,
        started  REAL NOT NULL,              -- unix seconds
        ended    REAL,                       -- NULL while running or after a crash
        pid      INTEGER
    );

    -- One row per proxied model request.  Token counts are cl100k counts of
    -- the prompt text (see docs/proxy.md); no headers, no keys, no bodies.
    CREATE TABLE ledger (
        id                INTEGER PRIMARY KEY,
        session_id        INTEGER REFERENCES ledger_sessions(id),
        time              REAL NOT NULL,     -- unix seconds, request arrival
        endpoint          TEXT NOT NULL,     -- openai.chat | anthropic.messages
        provider          TEXT,              -- providers.json entry used for rates
        model             TEXT,
        stream            INTEGER NOT NULL DEFAULT 0,
        status            INTEGER,           -- upstream HTTP status, NULL = no answer
        error             TEXT,              -- short kind: timeout | connect | dropped
        compressed        INTEGER NOT NULL DEFAULT 0,
        tokens_original   INTEGER NOT NULL,
        tokens_forwarded  INTEGER NOT NULL,
        tokens_saved      INTEGER NOT NULL,
        input_tokens      INTEGER,           -- as reported by the provider
        output_tokens     INTEGER,           -- as reported by the provider
        sources           TEXT,              -- JSON list of the slice's files
        slice_symbols     INTEGER,           -- distinct symbol names in the slice
        answer_symbols    INTEGER,           -- distinct project symbol names the answer used
        symbol_hits       INTEGER,           -- names in both
        duration_ms       REAL
    );
    CREATE INDEX ledger_time ON ledger(time);
    """,
    # 3: formerly Kura's tables; they live in their own database files now
    # (a product schema, storage/migrations.py), so this step adds nothing.
    "",
    # 4: formerly Strata's tables; they live in their own database files now
    # (a product schema, storage/migrations.py), so this step adds nothing.
    "",
    # 5: ledger accounting (storage/ledger.py): the provider's cache usage, what the
    # proxy's compression did to the forwarded prefix, rows written before their
    # token counts (crash safety), and sessions that record how they ended.
    """
    -- input_tokens now means tokens billed at the full input rate (OpenAI's
    -- prompt_tokens minus its cached_tokens); older rows never had cache figures,
    -- so the two readings agree for them.
    ALTER TABLE ledger ADD COLUMN cache_read_tokens INTEGER;       -- provider-reported cache hits
    ALTER TABLE ledger ADD COLUMN cache_write_tokens INTEGER;      -- provider-reported cache writes
    ALTER TABLE ledger ADD COLUMN mode TEXT;                       -- safe | aggressive | off
    ALTER TABLE ledger ADD COLUMN conversation TEXT;               -- stable conversation id
    ALTER TABLE ledger ADD COLUMN compaction INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE ledger ADD COLUMN prefix_invalidated_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE ledger ADD COLUMN miss_write_tokens INTEGER NOT NULL DEFAULT 0;  -- re-billed as cache writes
    ALTER TABLE ledger ADD COLUMN miss_input_tokens INTEGER NOT NULL DEFAULT 0;  -- re-billed at the input rate
    ALTER TABLE ledger ADD COLUMN counted INTEGER NOT NULL DEFAULT 1;  -- 0: token counts not (yet) written
    CREATE INDEX ledger_session ON ledger(session_id);

    ALTER TABLE ledger_sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'serve';
    ALTER TABLE ledger_sessions ADD COLUMN address TEXT;           -- http://host:port it served
    ALTER TABLE ledger_sessions ADD COLUMN crashed INTEGER NOT NULL DEFAULT 0;  -- closed by a later start
    """,
    # 6: formerly Stormbuffer's tables; they live in their own database files now
    # (a product schema, storage/migrations.py), so this step adds nothing.
    "",
    # 7: the code index's generation, a token every change the graph is built
    # from replaces (files written or dropped, import targets re-pointed), so a
    # saved graph can tell whether it still matches (indexer/graph_snapshot.py).
    # Triggers rather than calls in each writer: no write path can forget it.
    # Also each file's whole-text token count, saved by the first query that
    # needs it (a file's baseline_tokens), NULL until then and after a rewrite.
    """
    ALTER TABLE files ADD COLUMN tokens INTEGER;
    INSERT OR REPLACE INTO meta(key, value) VALUES ('code_generation', lower(hex(randomblob(8))));
    CREATE TRIGGER code_generation_file_added AFTER INSERT ON files BEGIN
        UPDATE meta SET value = lower(hex(randomblob(8))) WHERE key = 'code_generation';
    END;
    CREATE TRIGGER code_generation_file_dropped AFTER DELETE ON files BEGIN
        UPDATE meta SET value = lower(hex(randomblob(8))) WHERE key = 'code_generation';
    END;
    CREATE TRIGGER code_generation_file_changed
        AFTER UPDATE OF path, language, status, lines, is_test, hash ON files BEGIN
        UPDATE meta SET value = lower(hex(randomblob(8))) WHERE key = 'code_generation';
    END;
    CREATE TRIGGER code_generation_import_target AFTER UPDATE OF target_path ON imports BEGIN
        UPDATE meta SET value = lower(hex(randomblob(8))) WHERE key = 'code_generation';
    END;
    """,
    # 8: drop the products' tables an index written before the split carries
    # (always empty in a MemStrata index: each product opens its own file).
    """
    DROP TABLE IF EXISTS kura_fts;
    DROP TABLE IF EXISTS kura_chunks;
    DROP TABLE IF EXISTS kura_sources;
    DROP TABLE IF EXISTS strata_events;
    DROP TABLE IF EXISTS strata_entries;
    DROP TABLE IF EXISTS strata_branches;
    DROP TABLE IF EXISTS strata_commits;
    DROP TABLE IF EXISTS sbuf_fts_vocab;
    DROP TABLE IF EXISTS sbuf_fts;
    DROP TABLE IF EXISTS sbuf_chunks;
    DROP TABLE IF EXISTS sbuf_records;
    DROP TABLE IF EXISTS sbuf_files;
    """,
    # 9: the counterfactual bill (harness/proxy/counterfactual.py): the prompt tokens the
    # provider would have billed for the unmodified request, by rate, in the provider's
    # tokens; NULL when it could not be priced (no usage reported, rows written before).
    """
    ALTER TABLE ledger ADD COLUMN cf_input_tokens INTEGER;
    ALTER TABLE ledger ADD COLUMN cf_cache_read_tokens INTEGER;
    ALTER TABLE ledger ADD COLUMN cf_cache_write_tokens INTEGER;
    """,
    # 10: who recorded each row and session, so that a ledger shared by a team reads per
    # person and machine (storage/ledger.py); NULL on rows written before.
    """
    ALTER TABLE ledger ADD COLUMN user_label TEXT;
    ALTER TABLE ledger ADD COLUMN host_label TEXT;
    ALTER TABLE ledger_sessions ADD COLUMN user_label TEXT;
    ALTER TABLE ledger_sessions ADD COLUMN host_label TEXT;
    """,
    # 11: the symbol search keeps token positions (detail=full).  bm25() counts every
    # occurrence of a term; without positions FTS5 finds them by tokenizing each
    # matching row's text again, which was most of a search's time on a large index.
    # Scores, and so rankings, are the same; only the file grows a little.
    """
    CREATE VIRTUAL TABLE symbols_fts_full USING fts5(
        name, signature, doc, body,
        tokenize = 'porter unicode61 remove_diacritics 2',
        detail = full
    );
    INSERT INTO symbols_fts_full(rowid, name, signature, doc, body)
        SELECT rowid, name, signature, doc, body FROM symbols_fts;
    DROP TABLE symbols_fts;
    ALTER TABLE symbols_fts_full RENAME TO symbols_fts;
    """,
    # 12: Anthropic's 1-hour cache writes (cache_control "ttl": "1h"), billed at 2x the input rate
    # where 5-minute writes cost 1.25x: the part of cache_write_tokens the provider reported as
    # usage.cache_creation.ephemeral_1h_input_tokens, and the same part of the counterfactual's
    # writes.  NULL on rows written before and where the provider reported no split (all 5-minute).
    """
    ALTER TABLE ledger ADD COLUMN cache_write_1h_tokens INTEGER;
    ALTER TABLE ledger ADD COLUMN cf_cache_write_1h_tokens INTEGER;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

CORE_SCHEMA = Schema(
    name="MemStrata index",
    application_id=0x4D535452,  # "MSTR"
    migrations=tuple(MIGRATIONS),
)
