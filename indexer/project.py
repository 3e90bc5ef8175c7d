"""Where a project's index lives, and the lock that serialises index writers."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memstrata.storage import Store

from .scan import INDEX_DIR

INDEX_FILE = "index.db"
LOCK_FILE = "index.lock"


class ProjectError(Exception):
    """The project folder cannot be used (missing, not a directory, not writable)."""


def resolve_root(path: str | Path | None = None) -> Path:
    """The project root for ``path``: the nearest ancestor holding an index, else ``path``."""
    start = Path(path or os.getcwd()).expanduser()
    try:
        start = start.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ProjectError(f"project folder not found: {path}") from None
    if not start.is_dir():
        raise ProjectError(f"not a directory: {path}")
    for candidate in (start, *start.parents):
        if (candidate / INDEX_DIR / INDEX_FILE).is_file():
            return candidate
    return start


def index_dir(root: Path) -> Path:
    return root / INDEX_DIR


def open_store(root: Path, *, readonly: bool = False) -> Store:
    d = index_dir(root)
    if not readonly:
        try:
            d.mkdir(exist_ok=True)
            gitignore = d / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("*\n", encoding="utf-8")
        except OSError as exc:
            raise ProjectError(f"cannot create {INDEX_DIR}/ in the project: {exc.strerror}") from None
    return Store(d / INDEX_FILE, readonly=readonly)


class WriterLock:
    """An advisory file lock held while a process writes the index.

    flock() locks belong to an open file, so one process shares a single
    descriptor between its threads and counts re-entries.
    """

    _registry: dict[Path, "WriterLock"] = {}
    _registry_lock = threading.Lock()

    def __new__(cls, root: Path):
        path = (index_dir(root) / LOCK_FILE).resolve()
        with cls._registry_lock:
            inst = cls._registry.get(path)
            if inst is None:
                inst = super().__new__(cls)
                inst._init(path)
                cls._registry[path] = inst
            return inst

    def _init(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._depth = 0
        self._thread_lock = threading.RLock()

    def acquire(self, on_wait: Callable[[], None] | None = None, timeout: float | None = None) -> bool:
        self._thread_lock.acquire()
        if self._depth:
            self._depth += 1
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = None if timeout is None else time.monotonic() + timeout
        warned = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    self._thread_lock.release()
                    raise
            if deadline is not None and time.monotonic() >= deadline:
                os.close(fd)
                self._thread_lock.release()
                return False
            if not warned and on_wait is not None:
                on_wait()
                warned = True
            time.sleep(0.05)
        self._fd = fd
        self._depth = 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._thread_lock.release()

    def __enter__(self) -> "WriterLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def writer_active_elsewhere(root: Path) -> bool:
    """True when another process holds the writer lock (an index run is under way)."""
    lock = WriterLock(root)
    if lock._depth:  # held by this process
        return False
    path = lock.path
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
