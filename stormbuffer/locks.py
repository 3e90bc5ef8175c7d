"""Advisory file locks (``flock``): released by the kernel when the holder dies.

The mutation lock is a try-lock: a second writer is told at once that the
store is busy (``conflict``) rather than queued behind a person's editor
session.  The projection lock waits a bounded time, because two readers
syncing at once is ordinary and short.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from . import errors
from .errors import SbufError

PROJECTION_WAIT_S = 5.0


@contextlib.contextmanager
def exclusive(path: Path, *, wait: float = 0.0, busy: SbufError | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing).

    Raises ``busy`` (default: ``conflict``) when the lock is still held by
    someone else after ``wait`` seconds, and ``internal_error`` when the lock
    file cannot be opened (read-only store, missing folder).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError:
        raise SbufError("internal_error", errors.STORE_FAILED, "the lock file cannot be opened") from None
    try:
        deadline = time.monotonic() + wait
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise (busy or SbufError("conflict", errors.BUSY, "the store is busy (another "
                                             "sbuf command holds its mutation lock)")) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


__all__ = ["exclusive", "PROJECTION_WAIT_S"]
