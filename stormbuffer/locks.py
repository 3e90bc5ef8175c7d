"""Advisory file locks (``flock``): released by the kernel when the holder dies.

Both locks wait a bounded time before answering ``conflict``.  A writer holds
the mutation lock only for one write's sync, checks and file replacement
(milliseconds; no lock is held while a person's editor is open), so two
agents writing at once, or a person's ``sbuf approve`` during an agent's
burst of writes, is ordinary: the second waits its turn instead of failing
at random.  A lock still held after the wait (a stuck holder) is ``conflict``
as before.  The projection lock waits longer, because a sync of a large store
on a cold cache can take seconds.
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
MUTATION_WAIT_S = 2.0


@contextlib.contextmanager
def exclusive(path: Path, *, wait: float = 0.0, busy: SbufError | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing).

    Raises ``busy`` (default: ``conflict``) when the lock is still held by
    someone else after ``wait`` seconds, and ``internal_error`` when the lock
    file cannot be opened (read-only store, missing folder).
    """
    # A lock file is one of Stormbuffer's own: a link in its place (a store committed with a
    # repository can carry one) is refused, never followed -- opened with O_CREAT, it would create
    # an empty file where it points.
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        if path.is_symlink():
            raise SbufError("internal_error", errors.STORE_FAILED,
                            f"the lock file {path.name} is a link, where Stormbuffer keeps a file of its own; "
                            "remove the link") from None
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
                delay = min(delay * 2, 0.02)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


__all__ = ["exclusive", "PROJECTION_WAIT_S", "MUTATION_WAIT_S"]
