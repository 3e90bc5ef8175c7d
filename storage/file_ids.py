"""How a batch of written files is numbered, on both backends.

An index written one file at a time gives each new row the largest id its
table holds at that moment, plus one: for a file rewritten, the largest id
left after its old rows were deleted.  A batch writer that deletes and
inserts many files at once replays that order here, so the same run numbers
the same rows alike however its writes are grouped, and on either backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence


def numbered(conn, files: Sequence[tuple], old: dict[str, int], drop: Callable[[int], None],
             tables: Sequence[tuple[str, int | None]]) -> Iterator[tuple[list[int], tuple]]:
    """(first ids, item) for each item of ``files``, in order.

    An item's first element is a record with a ``path``; ``tables`` lists
    (table, index of the item's rows for it, None for one row per item), and
    ``first ids`` holds the first id each table gives the item.  ``old`` maps
    the paths already in the index to their file ids; ``drop(file_id)``
    deletes such a file's rows just before its turn, as a file-at-a-time
    writer would."""
    nxt: list[int] | None = None
    for f in files:
        path = f[0].path
        if path in old:
            drop(old[path])
        if nxt is None:
            # Deleting rows can only lower a table's largest id, and every id
            # handed out here is above it: one look at each table, after the
            # first file's old rows went, numbers the whole batch.
            nxt = [conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchone()[0]
                   for table, _ in tables]
        yield list(nxt), f
        for k, (_, rows) in enumerate(tables):
            nxt[k] += 1 if rows is None else len(f[rows])
