"""Every row of a code index, for tests that compare two indexes row by row."""

from __future__ import annotations

# Ids included; a file's ``indexed_at`` (the clock when it was written) left out.
TABLES = {
    "files": "SELECT id, path, language, size, mtime_ns, hash, status, error, encoding, lines, is_test"
             " FROM files ORDER BY id",
    "file_text": "SELECT * FROM file_text ORDER BY file_id",
    "symbols": "SELECT * FROM symbols ORDER BY id",
    "refs": "SELECT * FROM refs ORDER BY id",
    "imports": "SELECT * FROM imports ORDER BY id",
    "search": "SELECT rowid, name, signature, doc, body FROM symbols_fts ORDER BY rowid",
    "skipped": "SELECT * FROM skipped ORDER BY path",
}


def index_rows(store) -> dict[str, list]:
    return {name: store.execute(sql) for name, sql in TABLES.items()}
