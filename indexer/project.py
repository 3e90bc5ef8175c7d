"""Where a project's index lives, and the lock that serialises index writers."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memstrata.storage import Store, StoreCorrupt, StoreError
from memstrata.storage.json_types import echoed

from .scan import INDEX_DIR, printable_path

INDEX_FILE = "index.db"
LOCK_FILE = "index.lock"

# The largest --max-file-size: a file's decoded text is stored whole as one SQLite value (at
# most 1e9 bytes) and decoding can triple it (Windows-1252 or stray bytes -> 3-byte UTF-8), so a
# file above this cannot always be stored; and no hand-written source file comes near it.
MAX_FILE_BYTES_LIMIT = 256 * 1024**2


class ProjectError(Exception):
    """The project folder cannot be used (missing, not a directory, not writable)."""


def too_broad(root: Path) -> bool:
    """True for the filesystem root and the home folder itself: no project, but everything below."""
    if root == Path(root.anchor):
        return True
    try:
        return root == Path.home().resolve()
    except (RuntimeError, OSError):  # no home to compare with
        return False


def resolve_root(path: str | Path | None = None) -> Path:
    """The project root for ``path``: the nearest ancestor holding an index, else ``path``.

    An index in the home folder or the filesystem root (made once by naming that folder) is
    that folder's own: it never claims the projects below it, each of which keeps its own.
    """
    start = Path(path or os.getcwd()).expanduser()
    try:
        start = start.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ProjectError(f"project folder not found: {echoed(str(path))}") from None
    if not start.is_dir():
        raise ProjectError(f"not a directory: {echoed(str(path))}")
    for candidate in (start, *start.parents):
        if candidate != start and too_broad(candidate):
            continue
        if (candidate / INDEX_DIR / INDEX_FILE).is_file():
            return candidate
    return start


# What to do about an index SQLite cannot read (a damaged or overwritten file).
REBUILD_HINT = f"delete {INDEX_DIR}/{INDEX_FILE} and run memstrata index to rebuild it"


def index_dir(root: Path) -> Path:
    return root / INDEX_DIR


def checked_index_dir(root: Path) -> Path:
    """``index_dir(root)``, refused (:class:`ProjectError`) when using it would read or write
    outside the project: a ``.memstrata`` that is a link to a folder outside it, or a link inside
    it.  Everything MemStrata keeps there (the database and its journal, locks, the resident
    process's log) is a plain file it creates itself; a link in their place -- one a cloned
    repository can carry -- would have it create, truncate or overwrite the file the link names."""
    d = index_dir(root)
    if d.is_symlink() and d.exists():
        real_root = os.path.realpath(root)
        if os.path.commonpath([real_root, os.path.realpath(d)]) != real_root:
            raise ProjectError(f"cannot use {INDEX_DIR}/ in the project: it is a link to a folder outside the "
                               "project; remove the link")
    try:
        links = sorted(e.name for e in os.scandir(d) if e.is_symlink())
    except OSError:  # not there yet, or unreadable: what opens it says so
        links = []
    if links:
        raise ProjectError(f"cannot use {INDEX_DIR}/ in the project: {INDEX_DIR}/{printable_path(links[0])} is a link, "
                           "where MemStrata keeps a file of its own; remove the link")
    return d


def holds_index(root: Path) -> bool:
    """Whether the project has an index file with something in it.  An empty one (``touch``ed,
    or left by a run stopped before its first write) holds no index: opened, SQLite takes it for
    a new database, and a command that must write nothing would give it the schema."""
    index = checked_index_dir(root) / INDEX_FILE
    try:
        if not index.is_file():
            return False
        if index.stat().st_size:
            return True
        wal = index.with_name(index.name + "-wal")  # a first write may still be in the log only
        return wal.exists() and wal.stat().st_size > 0
    except OSError:
        return False


def open_store(root: Path, *, readonly: bool = False) -> Store:
    d = checked_index_dir(root)
    if not readonly:
        try:
            d.mkdir(exist_ok=True)
            gitignore = d / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("*\n", encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror
            if d.is_symlink() and not d.exists():  # mkdir's "File exists" names neither case
                reason = f"{INDEX_DIR} is a link to a folder that does not exist; remove the link"
            elif d.exists() and not d.is_dir():
                reason = f"a file named {INDEX_DIR} is in its place; move it away"
            raise ProjectError(f"cannot create {INDEX_DIR}/ in the project: {reason}") from None
    try:
        return Store(d / INDEX_FILE, readonly=readonly)
    except StoreCorrupt as exc:
        raise StoreCorrupt(f"the index {INDEX_DIR}/{INDEX_FILE} is unreadable ({exc.__cause__}); "
                           f"{REBUILD_HINT}") from exc.__cause__


STORE_ENV = "MEMSTRATA_STORE"


@dataclass(frozen=True)
class StoreChoice:
    """Where a command's index lives: the project's own SQLite file (the
    default) or a shared PostgreSQL database, under a project name."""

    url: str | None = None
    project_name: str | None = None

    @classmethod
    def of(cls, url: str | None = None, project_name: str | None = None) -> StoreChoice:
        """``--store`` (else ``MEMSTRATA_STORE``); ``sqlite`` or nothing means the local file."""
        url = url if url is not None else os.environ.get(STORE_ENV)
        url = (url or "").strip()
        if url.lower() in ("", "sqlite"):
            return cls(None, project_name)
        from memstrata.storage.postgres import describe, is_store_url

        if not is_store_url(url):
            shown = describe(url) if "://" in url else "that value"
            raise StoreError(f"--store takes sqlite or a postgresql://... URL, not {shown}")
        return cls(url, project_name)

    @property
    def shared(self) -> bool:
        return self.url is not None

    def name_for(self, root: Path) -> str:
        return self.project_name or root.name


def open_shared_store(choice: StoreChoice, root: Path, *, readonly: bool = False, create: bool = False):
    """The project's index in the shared database ``choice.url``."""
    from memstrata.storage.postgres import PgStore

    return PgStore(choice.url, choice.name_for(root), readonly=readonly, create=create)


class StoreRunLock:
    """The index-run lock of a store that holds its own locks (PostgreSQL):
    the same face as :class:`WriterLock`, held by the store's connection,
    so the server drops it when the process dies."""

    NAME = "index-run"

    def __init__(self, store):
        self.store = store
        self._depth = 0
        self._thread_lock = threading.RLock()

    def acquire(self, on_wait: Callable[[], None] | None = None, timeout: float | None = None) -> bool:
        self._thread_lock.acquire()
        if self._depth:
            self._depth += 1
            return True
        try:
            got = self.store.lock(self.NAME, on_wait=on_wait, timeout=timeout)
        except BaseException:
            self._thread_lock.release()
            raise
        if not got:
            self._thread_lock.release()
            return False
        self._depth = 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.store.unlock(self.NAME)
        self._thread_lock.release()

    def held_elsewhere(self) -> bool:
        return self.store.locked_elsewhere(self.NAME)

    def __enter__(self) -> StoreRunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def writer_lock(root: Path, store) -> WriterLock | StoreRunLock:
    """The lock an index run holds: a file lock beside a SQLite index, the server's lock otherwise."""
    return StoreRunLock(store) if store.dialect != "sqlite" else WriterLock(root)


class _OnePerFile:
    """One instance per lock file in a process (``FILE`` under the index folder): a record lock
    is the process's, and closing any descriptor of the file would drop it, so every user in the
    process shares the one descriptor."""

    FILE = ""
    _registry: dict[Path, _OnePerFile]
    _registry_lock = threading.Lock()

    def __init_subclass__(cls) -> None:
        cls._registry = {}

    def __new__(cls, root: Path):
        path = (index_dir(root) / cls.FILE).resolve()
        with _OnePerFile._registry_lock:
            inst = cls._registry.get(path)
            if inst is None:
                inst = super().__new__(cls)
                inst._init(path)
                cls._registry[path] = inst
            return inst

    def _init(self, path: Path) -> None:
        raise NotImplementedError


class WriterLock(_OnePerFile):
    """An advisory lock on ``.memstrata/index.lock``, held while a process writes the index.

    It is a POSIX record lock (``lockf``), not ``flock``: a record lock
    belongs to the process, so forked parse workers never inherit it, and the
    kernel drops it the moment its process dies -- a ``kill -9`` of an index
    run can never leave the project locked.  Because closing *any* descriptor
    of the file drops the process's record locks, each process keeps one
    descriptor per lock file open for good and shares it between its threads
    (re-entries are counted).
    """

    FILE = LOCK_FILE

    def _init(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._depth = 0
        self._thread_lock = threading.RLock()

    def _descriptor(self) -> int:
        """The process's descriptor of the lock file (reopened if the file was replaced)."""
        fd = self._fd
        if fd is not None:
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)  # we hold no lock on it (only called while unlocked)
            self._fd = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def acquire(self, on_wait: Callable[[], None] | None = None, timeout: float | None = None) -> bool:
        self._thread_lock.acquire()
        if self._depth:
            self._depth += 1
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        warned = False
        try:
            while True:
                fd = self._descriptor()
                if _try_lock(fd):
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    self._thread_lock.release()
                    return False
                if not warned and on_wait is not None:
                    on_wait()
                    warned = True
                time.sleep(0.05)
        except BaseException:
            self._thread_lock.release()
            raise
        self._depth = 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        self._thread_lock.release()

    def held_elsewhere(self) -> bool:
        """True when another process holds the lock (an index run is under way there)."""
        if not self._thread_lock.acquire(blocking=False):
            return False  # a thread of this process holds or is taking it
        try:
            if self._depth or not self.path.exists():
                return False
            fd = self._descriptor()
            if not _try_lock(fd):
                return True
            fcntl.lockf(fd, fcntl.LOCK_UN)
            return False
        except OSError:  # cannot open the lock file (read-only folder): nobody can be writing
            return False
        finally:
            self._thread_lock.release()

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_lock(fd: int) -> bool:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise


WATCH_LOCK_FILE = "watch.lock"


class WatchPresence(_OnePerFile):
    """A record lock a watching process holds for as long as it watches (``watch.lock``), so that
    another process's status can tell files changed with no one to catch up (stale) from files a
    watcher is applying (indexing)."""

    FILE = WATCH_LOCK_FILE

    def _init(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._holders = 0
        self._held = False
        self._lock = threading.Lock()

    def hold(self) -> None:
        """Mark this process as watching (another watcher may hold the mark already: either does)."""
        with self._lock:
            self._holders += 1
            if self._held:
                return
            try:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                self._held = _try_lock(self._fd)
            except OSError:  # a read-only folder: status falls back to saying stale
                pass

    def release(self) -> None:
        with self._lock:
            self._holders = max(0, self._holders - 1)
            if self._holders == 0 and self._held and self._fd is not None:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)
                self._held = False

    def held_elsewhere(self) -> bool:
        with self._lock:
            if self._holders or not self.path.exists():
                return False
            try:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDWR)
                if not _try_lock(self._fd):
                    return True
                fcntl.lockf(self._fd, fcntl.LOCK_UN)
            except OSError:
                return False
            return False


def writer_active_elsewhere(root: Path, store=None) -> bool:
    """True when another process holds the writer lock (an index run is under way)."""
    if store is not None and store.dialect != "sqlite":
        return store.locked_elsewhere(StoreRunLock.NAME)
    return WriterLock(root).held_elsewhere()
