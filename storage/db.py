"""The one embedded store: a SQLite file in WAL mode.

``Store`` owns one connection.  Writers go through :meth:`Store.write`, which
takes ``BEGIN IMMEDIATE`` so that two processes on the same project serialise
their writes instead of failing half-way; readers never block writers (WAL).
A per-instance lock makes one ``Store`` safe to share between threads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from .checked_file import read as read_checked
from .checked_file import write as write_checked
from .migrations import Schema, SchemaMismatch, adopt_legacy
from .schema import CORE_SCHEMA

BUSY_TIMEOUT_MS = 30_000

log = logging.getLogger(__name__)


WAL_SIZE_LIMIT = 64 * 1024 * 1024
# Free pages are given back (VACUUM) past both bounds: at least this many bytes, and at least
# this share of the file.
RECLAIM_MIN_BYTES = 64 * 1024 * 1024
RECLAIM_MIN_SHARE = 0.5


class StoreError(Exception):
    """The store cannot be opened or used (corrupt, newer schema, locked)."""


class StoreFull(StoreError):
    """A write failed because the disk (or the file-size limit) is full; nothing of it was kept."""


class StoreReadOnly(StoreError):
    """A write failed because the index file or its folder is read-only; nothing was changed."""


class StoreCorrupt(StoreError):
    """The file is not a database SQLite can read (overwritten, truncated or damaged)."""


def corrupt_error(exc: sqlite3.DatabaseError, path: Path) -> StoreCorrupt | None:
    """The typed error when ``exc`` says the file itself is damaged, else None."""
    if type(exc) is not sqlite3.DatabaseError:  # busy, locked, constraint... are subclasses
        return None
    return StoreCorrupt(f"{path.name} is unreadable ({exc})")


def write_error(exc: sqlite3.Error, name: str) -> sqlite3.Error | StoreError:
    """The typed error for a failed write, or ``exc`` itself when it is another kind."""
    text = str(exc).lower()
    if "disk is full" in text or "database or disk is full" in text:
        return StoreFull(f"the disk is full: {name} could not be written (the index is as it was "
                         "before this change; free some space and run it again)")
    if "readonly" in text or "read-only" in text:
        return StoreReadOnly(f"{name} is read-only: nothing was changed (make it and its folder "
                             "writable to update the index)")
    return exc


class StoreForeign(StoreError):
    """The file is another program's database (another schema chain's mark)."""


class StoreBusy(StoreError):
    """A write that asked not to wait found another writer holding the store."""


class MetaRows:
    """The key/value ``meta`` table, in the portable SQL both stores take
    (this one and storage/postgres.py's)."""

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.execute("SELECT value FROM meta WHERE key = ?", (key,))
        return row[0][0] if row else default

    def set_meta(self, key: str, value: str | None, conn=None) -> None:
        sql = "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        if conn is not None:
            conn.execute(sql, (key, value))
        else:
            with self.write() as c:
                c.execute(sql, (key, value))


class Store(MetaRows):
    # ``Store(MEMORY)`` is a private in-memory database (gone when closed),
    # for surfaces that offer an ephemeral mode (``strata --cache``).
    MEMORY = ":memory:"
    # The migration chain a file opened by this class follows; a product's
    # store class names its own (``class KuraDatabase(Store): schema = ...``).
    schema: Schema = CORE_SCHEMA
    # Which SQL the storage modules speak to it (storage/postgres.py is the other).
    dialect = "sqlite"

    def __init__(self, path: str | Path, *, readonly: bool = False, schema: Schema | None = None):
        self.path = Path(path)
        self.readonly = readonly
        self.schema = schema or type(self).schema
        self.memory = str(path) == self.MEMORY
        self._lock = threading.RLock()
        try:
            if readonly:
                self._conn = _connect_readonly(self.path)
            else:
                if not self.memory:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(
                    str(self.path), check_same_thread=False, isolation_level=None,
                    timeout=BUSY_TIMEOUT_MS / 1000,
                )
            self._configure()
            if not readonly:
                self._migrate()
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(Exception):
                self._conn.close()
            name = f"{self.path.parent.name}/{self.path.name}"
            if not readonly and not _writable(self.path):
                raise StoreReadOnly(f"{name} is read-only: nothing was changed (make it and its folder "
                                    "writable to update the index)") from exc
            typed = write_error(exc, name) if isinstance(exc, sqlite3.OperationalError) else exc
            if isinstance(typed, StoreError):
                raise typed from exc
            if (corrupt := corrupt_error(exc, self.path)) is not None:
                raise corrupt from exc
            raise StoreError(f"cannot open {self.path.name}: {exc}") from exc

    # -- connection -----------------------------------------------------------

    def _configure(self) -> None:
        c = self._conn
        c.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not self.readonly and not self.memory:
            mode = self._retry_locked(lambda: c.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            if mode.lower() != "wal":
                raise StoreError(f"cannot switch {self.path.name} to WAL mode (got {mode})")
            # NORMAL is durable across application crashes in WAL mode; only an
            # OS crash can lose the last transactions, never corrupt the file.
            c.execute("PRAGMA synchronous = NORMAL")
            # A large transaction (a generated file of a million lines) grows the WAL file; once a
            # checkpoint has emptied it, it is cut back to this size instead of staying that large.
            c.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        c.execute("PRAGMA foreign_keys = ON")
        c.execute("PRAGMA temp_store = MEMORY")
        c.execute("PRAGMA cache_size = -32000")
        # Fail fast on a file that is not a database at all.
        c.execute("SELECT count(*) FROM sqlite_master").fetchone()

    def _retry_locked(self, step):
        """Run ``step``, retrying while another connection holds a lock.

        Switching a new database to WAL needs an exclusive lock, and SQLite
        may answer SQLITE_BUSY there without consulting the busy handler,
        e.g. when two processes open a fresh index at the same moment.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        delay = 0.01
        while True:
            try:
                return step()
            except sqlite3.OperationalError as exc:
                transient = "locked" in str(exc) or "busy" in str(exc)
                if not transient or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _migrate(self) -> None:
        schema = self.schema
        with self._lock:
            marked = self._conn.execute("PRAGMA application_id").fetchone()[0]
            if marked != schema.application_id:
                # A new file, or one written before the products had chains
                # of their own: marked (and adopted) once, under the write lock.
                # Files already marked never take a write lock to open.
                with self.write() as c:
                    try:
                        adopt_legacy(c, schema)
                    except SchemaMismatch:
                        raise StoreForeign(f"{self.path.name} is not a {schema.name}: it belongs to "
                                           "another program; nothing was changed") from None
            version = self.user_version
            if version > schema.version:
                hint = ("delete the .memstrata folder" if schema is CORE_SCHEMA
                        else "nothing was changed")
                raise StoreError(
                    f"{'index' if schema is CORE_SCHEMA else schema.name} schema v{version} is newer "
                    f"than this MemStrata (v{schema.version}); upgrade MemStrata or {hint}"
                )
            while version < schema.version:
                with self.write() as c:
                    # Re-read inside the write lock: another process may have
                    # migrated while we waited.
                    version = c.execute("PRAGMA user_version").fetchone()[0]
                    if version >= schema.version:
                        break
                    for statement in _split_sql(schema.migrations[version]):
                        c.execute(statement)
                    c.execute(f"PRAGMA user_version = {version + 1}")
                version += 1

    @property
    def user_version(self) -> int:
        with self._lock:
            return self._conn.execute("PRAGMA user_version").fetchone()[0]

    @contextlib.contextmanager
    def write(self, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction: everything inside commits together or not at all.

        ``wait=False`` is for writes worth skipping rather than waiting for
        (a cache): while another writer holds the database it raises
        :class:`StoreBusy` at once instead of waiting up to the busy timeout.
        """
        if self.readonly:
            raise StoreReadOnly("store opened read-only")
        with self._lock:
            c = self._conn
            try:
                if wait:
                    c.execute("BEGIN IMMEDIATE")
                else:
                    c.execute("PRAGMA busy_timeout = 0")
                    try:
                        c.execute("BEGIN IMMEDIATE")
                    finally:
                        c.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            except sqlite3.OperationalError as exc:
                if not wait and "locked" in str(exc):
                    raise StoreBusy("another process is writing the store") from exc
                raise self._typed(exc) from exc
            try:
                yield c
            except BaseException as exc:
                # SQLite may already have rolled back (a full disk does): a second ROLLBACK
                # would fail and hide the error that matters.
                if c.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        c.execute("ROLLBACK")
                if isinstance(exc, sqlite3.OperationalError):
                    raise self._typed(exc) from exc
                raise
            else:
                try:
                    c.execute("COMMIT")
                except sqlite3.OperationalError as exc:
                    if c.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            c.execute("ROLLBACK")
                    raise self._typed(exc) from exc

    def _typed(self, exc: sqlite3.OperationalError) -> Exception:
        return write_error(exc, f"{self.path.parent.name}/{self.path.name}")

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several reads."""
        with self._lock:
            c = self._conn
            if c.in_transaction:  # nested inside write()/read(): reuse it
                yield c
                return
            c.execute("BEGIN")
            try:
                yield c
            except sqlite3.DatabaseError as exc:
                if (corrupt := corrupt_error(exc, self.path)) is not None:
                    raise corrupt from exc
                raise
            finally:
                c.execute("COMMIT")

    def execute(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row | tuple]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                if (corrupt := corrupt_error(exc, self.path)) is not None:
                    raise corrupt from exc
                raise

    def close(self) -> None:
        with self._lock:
            with contextlib.suppress(sqlite3.Error):
                if not self.readonly:
                    self._conn.execute("PRAGMA optimize")
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta -----------------------------------------------------------------

    @property
    def location(self) -> str:
        """How messages name the store."""
        return f"{self.path.parent.name}/{self.path.name}"

    def another(self) -> Store:
        """A second connection to the same database (for a thread of its own)."""
        return type(self)(self.path, readonly=self.readonly, schema=self.schema)

    def data_version(self) -> object:
        """Changes whenever another connection has committed a write."""
        return self.execute("PRAGMA data_version")[0][0]

    # Derived data (the graph snapshot) is a checked file beside the database.
    def save_derived(self, name: str, magic: bytes, obj: object) -> bool:
        return False if self.memory else write_checked(self.path.parent / name, magic, obj)

    def load_derived(self, name: str, magic: bytes) -> object | None:
        return None if self.memory else read_checked(self.path.parent / name, magic)

    def may_update(self, table: str) -> bool:
        """Whether this connection may change rows of ``table`` (a file store: unless read-only)."""
        return not self.readonly

    def reclaim_free_space(self) -> int:
        """Gives the file's free pages back to the file system when they are many (VACUUM, then the
        WAL truncated): rows deleted leave their pages in the file for reuse, so an index that
        dropped a large generated file stayed at its largest size.  Bytes given back, or 0."""
        if self.readonly or self.memory:
            return 0
        with self._lock:
            c = self._conn
            free, pages, size = (c.execute(f"PRAGMA {name}").fetchone()[0]
                                 for name in ("freelist_count", "page_count", "page_size"))
            if free * size < RECLAIM_MIN_BYTES or free < pages * RECLAIM_MIN_SHARE or c.in_transaction:
                return 0
            try:
                c.execute("VACUUM")
            except sqlite3.OperationalError as exc:  # a full disk, another writer: tried again next time
                log.warning("the index's %d MB of free pages were not given back: %s", free * size >> 20, exc)
                return 0
            # The rewrite went through the WAL: empty and cut it now unless a reader still needs it
            # (no wait; journal_size_limit cuts it at a later checkpoint then).
            c.execute("PRAGMA busy_timeout = 0")
            try:
                c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.OperationalError:
                pass
            finally:
                c.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            return free * size

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            p = Path(str(self.path) + suffix)
            with contextlib.suppress(OSError):
                total += p.stat().st_size
        return total

    def integrity_ok(self) -> bool:
        with self._lock:
            return self._conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection.

    A WAL database needs its ``-shm`` file to be read.  When that file is
    absent and cannot be made (a read-only filesystem, or a folder this
    process may not write), no other process has the database open in WAL
    mode either, so it is opened as immutable.
    """
    def connect(query: str) -> sqlite3.Connection:
        conn = sqlite3.connect(readonly_uri(path) + query, uri=True, check_same_thread=False,
                               isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    try:
        return connect("")
    except sqlite3.OperationalError:
        if _can_create_in(path.parent) or Path(str(path) + "-shm").exists():
            raise
        return connect("&immutable=1")


def _can_create_in(folder: Path) -> bool:
    """Whether this process may create a file in ``folder`` (the ``-shm`` beside a database)."""
    try:
        read_only_fs = os.statvfs(folder).f_flag & os.ST_RDONLY
    except OSError:
        return True
    return not read_only_fs and os.access(folder, os.W_OK)


def _writable(path: Path) -> bool:
    """Whether this process may write the database and the journal files beside it."""
    folder_ok = os.access(path.parent, os.W_OK)
    return folder_ok and (not path.exists() or os.access(path, os.W_OK))


def readonly_uri(path: str | Path) -> str:
    """A ``file:`` URI opening ``path`` read-only, whatever characters it holds.

    SQLite decodes %XX escapes in a URI and treats ``?`` and ``#`` as the start
    of the query and fragment, so an unquoted path such as ``a%2f..%2fb`` would
    open another file, and one containing ``?`` or ``#`` would lose
    ``mode=ro`` (and create a stray database where the path was cut).  The
    empty authority (``file://`` + an absolute path) keeps a path that begins
    with ``//`` from being read as a host name.
    """
    absolute = os.fsencode(Path(path).absolute())
    return f"file://{quote(absolute, safe='/')}?mode=ro"


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements (no semicolons inside our literals;
    a trigger body's inner semicolons are kept: SQLite says when a statement
    is complete)."""
    statements, buf = [], []
    for line in script.splitlines():
        stripped = line.split("--", 1)[0]
        buf.append(stripped)
        if stripped.rstrip().endswith(";"):
            stmt = "\n".join(buf).strip()
            if not sqlite3.complete_statement(stmt):
                continue
            if stmt.strip(";").strip():
                statements.append(stmt)
            buf = []
    tail = "\n".join(buf).strip()
    if tail:
        statements.append(tail)
    return statements
