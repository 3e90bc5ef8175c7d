"""Schema of the MemStrata store and its forward migrations.

The version lives in ``PRAGMA user_version``.  Each migration moves the
schema from version ``n`` to ``n + 1`` inside one transaction; migrations are
append-only, so a store written by an older release opens in a newer one.
Every product surface (code index, savings ledger, the compatible MCP
servers) adds its tables here rather than opening a database of its own.
"""

from __future__ import annotations

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
    # 3: Kura-compatible document databases (storage/kura_store.py).  Each Kura
    # database folder holds its own store; these tables are empty elsewhere.
    """
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

    -- External content: the text lives once, in kura_chunks; kura_store keeps
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
    # 4: Strata-compatible databases (storage/strata_store.py).  Each Strata
    # database folder holds its own store; these tables are empty elsewhere.
    """
    -- The commit clock: every version ever handed out, with the branch whose
    -- timeline it belongs to (NULL: engine bookkeeping no branch can read at).
    CREATE TABLE strata_commits (
        version       INTEGER PRIMARY KEY,
        branch        INTEGER,
        committed_at  INTEGER NOT NULL           -- UTC microseconds
    );
    CREATE INDEX strata_commits_branch ON strata_commits(branch, version);

    -- A fork points at its parent and the parent version it was taken at;
    -- it shares the parent's rows up to that version instead of copying them.
    CREATE TABLE strata_branches (
        id              INTEGER PRIMARY KEY,
        name            TEXT NOT NULL,
        generation      INTEGER NOT NULL,
        status          TEXT NOT NULL,           -- active | deleted
        parent          INTEGER REFERENCES strata_branches(id),
        fork_version    INTEGER,
        fork_timestamp  INTEGER,
        created_at      INTEGER,
        deleted_at      INTEGER,
        state_revision  INTEGER NOT NULL DEFAULT 0
    );
    CREATE UNIQUE INDEX strata_branches_active ON strata_branches(name) WHERE status = 'active';

    -- Every version of every entity (KV pairs, JSON documents, vectors, graph
    -- nodes and edges, collection/graph/space records): a read at version T
    -- takes the newest row at or below T.  value NULL is a deletion.
    CREATE TABLE strata_entries (
        branch   INTEGER NOT NULL,
        space    TEXT NOT NULL,
        kind     INTEGER NOT NULL,
        key      BLOB NOT NULL,
        version  INTEGER NOT NULL,
        value    BLOB,
        aux      TEXT,
        committed_at INTEGER,                    -- the commit's time (see the trigger below)
        PRIMARY KEY (branch, space, kind, key, version)
    ) WITHOUT ROWID;
    -- A commit of one row is one INSERT; this records the commit with it, in
    -- the same statement (and so atomically).  Larger commits insert their
    -- commit row themselves, which this then leaves alone.
    CREATE TRIGGER strata_entries_commit AFTER INSERT ON strata_entries WHEN NEW.committed_at IS NOT NULL BEGIN INSERT OR IGNORE INTO strata_commits(version, branch, committed_at) VALUES (NEW.version, NEW.branch, NEW.committed_at); END;

    -- Append-only event logs, dense sequences per branch and space, each
    -- event chained to the previous one by its SHA-256 hash.
    CREATE TABLE strata_events (
        branch         INTEGER NOT NULL,
        space          TEXT NOT NULL,
        sequence       INTEGER NOT NULL,
        version        INTEGER NOT NULL,
        event_type     TEXT NOT NULL,
        payload        TEXT NOT NULL,            -- compact JSON, keys sorted
        timestamp      INTEGER NOT NULL,         -- UTC microseconds
        previous_hash  BLOB NOT NULL,
        hash           BLOB NOT NULL,
        PRIMARY KEY (branch, space, sequence)
    ) WITHOUT ROWID;
    CREATE INDEX strata_events_type ON strata_events(branch, space, event_type, sequence);
    """,
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
    # 6: Stormbuffer-compatible agent memory (storage/stormbuffer_store.py).  The
    # projection of one Stormbuffer store's Markdown records; the Markdown is
    # the source of truth, so these tables can be dropped and rebuilt at will.
    """
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

    -- External content over sbuf_chunks.retrieval; stormbuffer_store keeps the
    -- two in step.  No stemmer and diacritics kept: Stormbuffer's tokenizer.
    CREATE VIRTUAL TABLE sbuf_fts USING fts5(
        retrieval,
        content = 'sbuf_chunks', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 0'
    );
    -- Per-token document counts: a query clause whose token is in at least
    -- half the chunks has its BM25 weight clamped to 1e-6 by FTS5, so search
    -- need not score it (storage/stormbuffer_store.py).
    CREATE VIRTUAL TABLE sbuf_fts_vocab USING fts5vocab(sbuf_fts, 'row');
    """,
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
]

SCHEMA_VERSION = len(MIGRATIONS)
