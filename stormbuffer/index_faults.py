"""Telling an index file that is damaged from one that merely cannot be used right now.

The index is a projection of the Markdown, so a file SQLite cannot read, or one
another program wrote, is deleted and rebuilt.  A failure from outside the file
(no space left, a read-only folder, an I/O error, a folder where the file should
be) says nothing against its contents: deleting it then would turn a full disk
into a lost index that cannot be rebuilt until space returns.  Such a file is
left exactly as it is, and the process projects the Markdown into memory
instead (``memory_projection``), as Stormbuffer's own writes never need SQLite.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from pathlib import Path

from memstrata.storage import Store, StoreBusy, StoreCorrupt, StoreError, StoreForeign, StoreFull, StoreReadOnly

from . import index_db as sb
from .schema import STORMBUFFER_SCHEMA


def damaged(exc: BaseException) -> bool:
    """Whether a failure to open or use the index says the file itself is bad."""
    if isinstance(exc, (StoreCorrupt, StoreForeign)):
        return True
    if isinstance(exc, (StoreFull, StoreReadOnly, StoreBusy)):
        return False
    if isinstance(exc, StoreError):
        # A newer schema comes without a SQLite error; an I/O failure ("disk I/O
        # error", "unable to open database file") carries one.
        return not isinstance(exc.__cause__, sqlite3.OperationalError)
    return False


def busy(exc: BaseException) -> bool:
    """Whether another process holds the index (retrying helps, falling back does not)."""
    text = str(exc)
    return isinstance(exc, StoreBusy) or (isinstance(exc, sqlite3.OperationalError)
                                          and ("locked" in text or "busy" in text))


# SQLite's "dead man switch" byte in a -shm file: every connection to the database
# holds a shared POSIX lock on it (os_unix.c, UNIX_SHM_DMS).
_SHM_DMS_OFFSET = 128


def drop_unused_side_files(path: Path) -> None:
    """Remove the ``-wal``/``-shm`` files a failed open left behind, when no
    connection uses them and the WAL holds no commit.

    On a full disk SQLite grows a new ``-shm`` file as far as the space goes before
    it gives up, and leaves it: that would take the last free blocks from the
    record a write is about to save.  SQLite removes the same files when its last
    connection closes, so nothing is lost.
    """
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    try:
        if wal.stat().st_size:
            return
    except FileNotFoundError:
        pass
    except OSError:
        return
    try:
        fd = os.open(shm, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SHM_DMS_OFFSET)
        except OSError:
            return  # a live connection holds it
        with contextlib.suppress(OSError):
            shm.unlink()
            wal.unlink(missing_ok=True)
    finally:
        os.close(fd)


def memory_projection() -> Store:
    """An empty projection held in memory, for a process that cannot use the file."""
    store = Store(Store.MEMORY, schema=STORMBUFFER_SCHEMA)
    store.set_meta(sb.MARKER_KEY, "1")
    return store


__all__ = ["damaged", "busy", "drop_unused_side_files", "memory_projection"]
