"""Schema of a Strata database file (its own migration chain; storage/migrations.py)."""

from __future__ import annotations

from memstrata.storage.migrations import META_TABLE, LegacyAdoption, Schema

STRATA_SCHEMA = Schema(
    name="Strata database",
    application_id=0x53545241,  # "STRA"
    migrations=(
        # 1: the tables (step 4 of the shared chain before the products had their own files).
        META_TABLE + """
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
    ),
    legacy=LegacyAdoption(owns=("strata_",), since=4, version=1),
)
