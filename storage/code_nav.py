"""Reads of the code index for symbol navigation: one file's row, text and
definitions, the uses of one name in a few files, the imports of one member.

Each read touches only the rows it names (through the ``files.path``,
``refs_file``, ``symbols_file`` and ``imports_target`` indexes), so a lookup
costs the same on a 500k-line index as on a small one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .db import Store
from .text import stored_text


@dataclass(slots=True, frozen=True)
class FileRow:
    id: int
    path: str
    language: str | None
    size: int
    mtime_ns: int
    hash: str
    is_test: bool


def file_row(store: Store, path: str) -> FileRow | None:
    rows = store.execute(
        "SELECT id, path, language, size, mtime_ns, hash, is_test FROM files WHERE path = ?", (path,))
    if not rows:
        return None
    i, p, lang, size, mtime, h, test = rows[0]
    return FileRow(i, p, lang, size, mtime, h, bool(test))


def file_text(store: Store, file_id: int) -> str | None:
    rows = store.execute("SELECT text FROM file_text WHERE file_id = ?", (file_id,))
    return stored_text(rows[0][0]) if rows else None


def file_symbols(store: Store, file_id: int) -> list[tuple]:
    """Rows of (name, qualname, kind, parent, start_line, end_line, signature), in definition order."""
    return store.execute(
        "SELECT name, qualname, kind, parent, start_line, end_line, signature FROM symbols"
        " WHERE file_id = ? ORDER BY id", (file_id,))


def file_refs(store: Store, file_ids: Sequence[int], name: str, target: str) -> list[tuple]:
    """Rows of (file_id, scope, kind, receiver, line, count, target, name) of the references
    spelled ``name`` or resolved to ``target`` (under another name: an import's alias); a
    variable's declared type (a ``bind`` row) is no use of its own: its type reference is."""
    out: list[tuple] = []
    ids = list(file_ids)
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        out += store.execute(
            "SELECT file_id, scope, kind, receiver, line, count, target, name FROM refs"
            f" WHERE file_id IN ({','.join('?' * len(chunk))}) AND (name = ? OR target = ?) AND kind != 'bind'",
            (*chunk, name, target))
    return out


def unattributed_counts(store: Store) -> dict[str, int]:
    """Per name, how many of its uses the index attributed to no definition (a method called on a
    receiver of unknown type whose name several classes define, a name defined nowhere here):
    one pass over the references (they are not indexed by name)."""
    return {name: int(n) for name, n in store.execute(
        "SELECT name, sum(count) FROM refs WHERE target IS NULL AND kind != 'bind' GROUP BY name")}


def file_ids(store: Store, paths: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    paths = list(paths)
    for i in range(0, len(paths), 500):
        chunk = paths[i : i + 500]
        for fid, p in store.execute(
                f"SELECT id, path FROM files WHERE path IN ({','.join('?' * len(chunk))})", tuple(chunk)):
            out[p] = fid
    return out


def member_imports(store: Store, target_path: str, name: str) -> list[tuple]:
    """Rows of (path, module, alias, line) of the imports of ``name`` from ``target_path``."""
    return store.execute(
        "SELECT f.path, i.module, i.alias, i.line FROM imports i JOIN files f ON f.id = i.file_id"
        " WHERE i.target_path = ? AND i.name = ? ORDER BY f.path, i.line", (target_path, name))


def default_export_name(store: Store, path: str) -> str | None:
    """The name a JavaScript/TypeScript module's `export default name` names (its `bind` row of
    `default`), if it has one."""
    rows = store.execute(
        "SELECT r.name FROM refs r JOIN files f ON f.id = r.file_id"
        " WHERE f.path = ? AND r.kind = 'bind' AND r.receiver = 'default' AND r.scope IS NULL LIMIT 1", (path,))
    return rows[0][0] if rows else None
