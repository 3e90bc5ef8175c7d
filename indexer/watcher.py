"""File watching: watchdog events -> debounced batches of changed paths.

Editors save in many ways (write in place, write a temp file then rename,
delete then create) and a ``git checkout`` touches hundreds of files at once.
We do not interpret individual events: every path an event names (source and
destination) goes into a pending set, and once the tree has been quiet for
``debounce`` seconds (or ``max_delay`` has passed since the first event) the
whole set is handed over.  Whoever handles it compares each path with the
index, so a burst costs one update and a no-op save costs nothing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from memstrata.storage import StoreError

from .scan import INDEX_DIR

log = logging.getLogger(__name__)

# Paths under these top-level folders never reach the index; dropping their
# events early keeps our own database writes from waking the watcher.
_IGNORED_TOP = frozenset({INDEX_DIR, ".git", ".hg", ".svn"})
# The one file under .git the index reads: the repository's own ignore rules, as a .gitignore.
GIT_EXCLUDE = ".git/info/exclude"


class Changes:
    """One batch: changed file paths and directories whose contents changed wholesale;
    ``full``: compare the whole project with the index (a catch-up that could not finish)."""

    def __init__(self, files: set[str], dirs: set[str], full: bool = False):
        self.files = files
        self.dirs = dirs
        self.full = full

    def __bool__(self) -> bool:
        return bool(self.files or self.dirs or self.full)


# A batch the index could not take (a full disk, a read-only index) is tried again after these
# many seconds, doubling up to the last: freeing space is enough, no restart or edit needed.
RETRY_FIRST_S = 2.0
RETRY_MAX_S = 60.0


_CHANGES = [FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent,
            DirCreatedEvent, DirDeletedEvent, DirMovedEvent, DirModifiedEvent]


class Watcher(FileSystemEventHandler):
    def __init__(self, root: Path, on_changes: Callable[[Changes], None],
                 debounce: float = 0.05, max_delay: float = 0.5):
        self.root = root.resolve()
        self._root_str = str(self.root) + os.sep
        self.on_changes = on_changes
        self.debounce = debounce
        self.max_delay = max_delay
        self._files: set[str] = set()
        self._dirs: set[str] = set()
        self._full = False
        self._retry_in = 0.0  # the wait before the next try of a failed batch; 0: none failed
        self._retry_at = 0.0
        self._first = 0.0
        self._last = 0.0
        self._cv = threading.Condition()
        self._stop = False
        self._busy = False
        self._observer = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        self._observer = Observer()
        # Only what changes a file: every open and every read-only close of a project file (the
        # server's own reads, an editor's, git's) would otherwise be read from inotify and turned
        # into an event in Python, on a thread that competes with the questions for the interpreter.
        self._observer.schedule(self, str(self.root), recursive=True, event_filter=_CHANGES)
        self._observer.daemon = True
        self._observer.start()
        self._thread = threading.Thread(target=self._loop, name="memstrata-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=30)

    @property
    def pending(self) -> bool:
        with self._cv:
            return bool(self._files or self._dirs or self._full) or self._busy

    @property
    def held_back(self) -> bool:
        """Whether a batch the index could not take waits for its next try."""
        with self._cv:
            return self._retry_in > 0

    def catch_up(self) -> None:
        """Have the whole project compared with the index at the next try (a catch-up that
        failed for lack of space)."""
        with self._cv:
            self._full = True
            if not self._busy:  # (a batch of this watcher that failed is held back by its loop)
                self._hold_back()
            self._cv.notify_all()

    def _hold_back(self) -> None:
        # (with the condition held)
        self._retry_in = min(RETRY_MAX_S, self._retry_in * 2) if self._retry_in else RETRY_FIRST_S
        self._retry_at = time.monotonic() + self._retry_in
        if not self._first:
            self._first = self._last = self._retry_at

    # -- events -----------------------------------------------------------------

    def _rel(self, path: str | bytes) -> str | None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not path.startswith(self._root_str):
            return None
        rel = path[len(self._root_str):].replace(os.sep, "/")
        if not rel or (rel.split("/", 1)[0] in _IGNORED_TOP and rel != GIT_EXCLUDE):
            return None
        return rel

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = [event.src_path]
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.append(dest)
        now = time.monotonic()
        with self._cv:
            for p in paths:
                rel = self._rel(p)
                if rel is None:
                    continue
                if event.is_directory:
                    if event.event_type in ("created", "deleted", "moved"):
                        self._dirs.add(rel)
                else:
                    self._files.add(rel)
            if not (self._files or self._dirs):
                return
            if not self._first:
                self._first = now
            self._last = now
            self._cv.notify_all()

    # -- debounce loop ----------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stop and not (self._files or self._dirs or self._full):
                    self._cv.wait()
                if self._stop:
                    return
                while not self._stop:
                    now = time.monotonic()
                    quiet_at = self._last + self.debounce
                    deadline = self._first + self.max_delay
                    wake = max(min(quiet_at, deadline), self._retry_at)
                    if now >= wake:
                        break
                    self._cv.wait(wake - now)
                if self._stop:
                    return
                batch = Changes(self._files, self._dirs, self._full)
                self._files, self._dirs, self._full = set(), set(), False
                self._first = self._last = 0.0
                self._busy = True
            failed = True
            try:
                self.on_changes(batch)
                failed = False
            except StoreError as exc:  # a full disk, a read-only index: said once, tried again
                if not self.held_back:
                    log.warning("the index could not take the latest changes: %s; trying again "
                                "until it can", exc)
            except Exception:  # keep watching whatever one batch did
                if not self.held_back:
                    log.exception("updating the index after file changes failed; trying again")
            finally:
                with self._cv:
                    self._busy = False
                    if failed:
                        # Nothing of the batch was kept: it goes back, merged with what came since.
                        self._files |= batch.files
                        self._dirs |= batch.dirs
                        self._full = self._full or batch.full
                        self._hold_back()
                    elif self._retry_in:
                        self._retry_in = self._retry_at = 0.0
                        log.warning("the index has taken the changes it could not take before")
