"""The index on a PostgreSQL server: many projects in one database, one schema each.

:class:`PgStore` answers to the same API as :class:`storage.db.Store`
(``write``, ``read``, ``execute``, meta, ``readonly``), so the indexer,
compressor, ledger and MCP tools run on either.  The storage modules write
portable SQL with ``?`` placeholders; :class:`PgConnection` turns it into
psycopg's.  What cannot be portable (full-text search, the file texts,
locks) is chosen by ``store.dialect`` inside storage/ only.

Concurrency follows the SQLite store's: a write transaction first takes a
transaction-level advisory lock on the project (the ``BEGIN IMMEDIATE`` of
PostgreSQL), so two writers queue instead of failing; readers read a
repeatable-read snapshot and never wait.  Every lock is the server's
advisory lock of a connection, so a killed process leaves none behind.

Credentials come from the URL, the ``PG*`` environment or ``~/.pgpass``
(libpq reads them); they are never logged, stored or put in an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from functools import lru_cache
from urllib.parse import urlsplit

from .checked_file import decode as decode_checked
from .checked_file import encode as encode_checked
from .db import MetaRows, StoreBusy, StoreError, StoreFull, StoreReadOnly
from .pg_schema import PG_MIGRATIONS, PG_SCHEMA_VERSION, REGISTRY_DDL

log = logging.getLogger(__name__)

SCHEMES = ("postgresql", "postgres")
VERSION_KEY = "pg_schema_version"
CONNECT_TIMEOUT_S = 10
# Advisory lock namespaces (the first of the two int4 keys).
_NS_MIGRATE = 0x4D53_0001
_NS_WRITE = 0x4D53_0002
_NS_NAMED = 0x4D53_0003


class StoreUnavailable(StoreError):
    """The server cannot be reached, or refused the connection (URL, password, database)."""


class ProjectNotFound(StoreError):
    """A reader asked for a project the store does not hold."""


def _scheme(value: str) -> str:
    # Not urlsplit: it raises on a malformed host or port, which must reach
    # libpq (and come back as one sentence), not end the command.
    head, sep, _ = value.partition("://")
    return head.lower() if sep else ""


def is_store_url(value: str | None) -> bool:
    return bool(value) and _scheme(value) in SCHEMES


def describe(url: str) -> str:
    """The URL as it may be shown: no password, no query string (it may hold one)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        user = f"{parts.username}@" if parts.username else ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a bracketed host or a port that cannot be: nothing of it is safe to echo
        return f"{_scheme(url) or 'postgresql'}://(malformed URL)"
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


def _scrub(text: str, url: str) -> str:
    """One line of a server or libpq message with anything secret taken out."""
    line = " ".join(text.strip().split())
    try:
        secret = urlsplit(url).password
    except ValueError:  # malformed: take what sits where a password would
        found = re.search(r"://[^/@:]*:([^/@]*)@", url)
        secret = found.group(1) if found else None
    if secret:
        line = line.replace(secret, "***")
    line = line.replace(url, describe(url))
    return re.sub(r"password=\S+", "password=***", line)


def schema_name(project: str) -> str:
    """The schema of ``project``: readable, unique per exact name, a valid identifier."""
    slug = re.sub(r"[^a-z0-9]+", "_", project.lower()).strip("_")[:40] or "project"
    digest = hashlib.blake2b(project.encode("utf-8"), digest_size=4).hexdigest()
    return f"ms_{slug}_{digest}"


def _key(text: str) -> int:
    """An int4 advisory-lock key for ``text``."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=4).digest(), "big", signed=True)


@lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """SQLite-flavoured portable SQL to psycopg's: ``?`` -> ``%s``, ``%`` -> ``%%``.

    Placeholders inside quoted literals are left alone.
    """
    out, quote = [], None
    for ch in sql:
        if quote:
            out.append("%%" if ch == "%" else ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


def _param(value):
    # PostgreSQL text cannot hold NUL; the one column where exactness
    # matters (file_text) is bytea and never comes through here as str.
    if isinstance(value, str) and "\x00" in value:
        return value.replace("\x00", "\ufffd")
    return value


def _params(params):
    if isinstance(params, dict):
        return {k: _param(v) for k, v in params.items()}
    return tuple(_param(v) for v in params)


def list_projects(url: str) -> list[str]:
    """The projects the database at ``url`` holds, without opening any of them."""
    psycopg = _psycopg()
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                             application_name="memstrata") as conn:
            if conn.execute("SELECT to_regclass('public.memstrata_projects')").fetchone()[0] is None:
                return []
            return sorted(r[0] for r in conn.execute("SELECT name FROM public.memstrata_projects"))
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot read {describe(url)}: {_scrub(str(exc), url)}") from None
    except Exception as exc:  # a URL libpq cannot parse
        raise StoreUnavailable(f"cannot use the store URL {describe(url)}: {_scrub(str(exc), url)}") from None


class _Cursor:
    """What the storage modules use of a sqlite3 cursor."""

    def __init__(self, cur):
        self._cur = cur

    def fetchone(self):
        return self._cur.fetchone() if self._cur.description else None

    def fetchall(self):
        return self._cur.fetchall() if self._cur.description else []

    def __iter__(self):
        return iter(self.fetchall())

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount


class PgConnection:
    """A psycopg connection that takes the storage modules' portable SQL."""

    dialect = "postgresql"

    def __init__(self, raw):
        self.raw = raw

    def execute(self, sql: str, params=()) -> _Cursor:
        cur = self.raw.cursor()
        # Always with parameters, even none: psycopg then reads %% as %, which translate() relies on.
        cur.execute(translate(sql), _params(params) if params else ())
        return _Cursor(cur)

    def executemany(self, sql: str, rows) -> None:
        rows = [_params(r) for r in rows]
        if rows:
            with self.raw.cursor() as cur:
                cur.executemany(translate(sql), rows)

    def copy_rows(self, table: str, columns: Sequence[str], rows, *, checked: bool = False,
                  types: Sequence[str] | None = None) -> None:
        """Bulk-insert with COPY (a fraction of the time of row-by-row inserts).
        ``checked``: the caller already took NUL out of the rows' text;
        ``types``: the columns' types, for the binary format (less to format and parse)."""
        binary = " (FORMAT BINARY)" if types else ""
        with self.raw.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN{binary}") as copy:
            if types:
                copy.set_types(list(types))
            write = copy.write_row
            for row in rows:
                write(row if checked else _params(row))

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus
        return self.raw.info.transaction_status != TransactionStatus.IDLE


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise StoreError("a postgresql:// store needs psycopg: pip install 'memstrata[postgres]'") from None
    return psycopg


class PgStore(MetaRows):
    """One project's index in a PostgreSQL database (see the module docstring)."""

    dialect = "postgresql"

    def __init__(self, url: str, project: str, *, readonly: bool = False, create: bool = True):
        if not is_store_url(url):
            raise StoreError(f"not a PostgreSQL URL: {describe(url) if '://' in url else 'expected postgresql://...'}")
        project = project.strip()
        if not project or len(project) > 200 or any(ord(c) < 32 for c in project):
            raise StoreError("the project name must be 1-200 printable characters")
        self.url = url
        self.project = project
        self.schema_name = schema_name(project)
        self.readonly = readonly
        self.memory = False
        self.path = None  # no file: callers that keep files beside the store ask the store instead
        self.location = f"{describe(url)} project {project!r}"
        self._lock = threading.RLock()
        self._conn = None
        self._held: dict[str, int] = {}  # named locks this connection holds, and how often
        self._connect()
        if readonly or not create:
            if not self._project_exists():
                known = self._projects()
                hint = f" (it holds: {', '.join(sorted(known)[:10])})" if known else " (it holds none yet)"
                self.close()
                raise ProjectNotFound(f"no project {project!r} in {describe(url)}{hint}; "
                                      "run memstrata index --store URL in its checkout first")
        if readonly:
            self._check_version()
        else:
            self._migrate()

    # -- connection -----------------------------------------------------------

    def _connect(self) -> None:
        psycopg = _psycopg()
        try:
            raw = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                  application_name="memstrata")
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot connect to {describe(self.url)}: {_scrub(str(exc), self.url)}") from None
        except Exception as exc:  # a URL libpq cannot parse
            raise StoreUnavailable(f"cannot use the store URL {describe(self.url)}: "
                                   f"{_scrub(str(exc), self.url)}") from None
        raw.execute(f"SET search_path TO {self.schema_name}")
        if self.readonly:
            raw.execute("SET default_transaction_read_only = on")
        self._conn = raw

    def _reconnect_if_dropped(self) -> bool:
        """Reopen a connection the server closed (a restart, an idle timeout)."""
        raw = self._conn
        if raw is not None and not raw.closed and not raw.broken:
            return False
        with contextlib.suppress(Exception):
            raw.close()
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                self._connect()
                log.info("reconnected to %s", describe(self.url))
                self._retake_locks()
                return True
            except StoreUnavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def _typed(self, exc) -> Exception:
        psycopg = _psycopg()
        errors = psycopg.errors
        if isinstance(exc, errors.DiskFull):
            return StoreFull(f"the server's disk is full: {self.location} was not changed")
        if isinstance(exc, (errors.ReadOnlySqlTransaction, errors.InsufficientPrivilege)):
            return StoreReadOnly(f"{self.location} is read-only for this role: nothing was changed")
        if isinstance(exc, psycopg.OperationalError):
            return StoreUnavailable(f"lost the connection to {describe(self.url)}: {_scrub(str(exc), self.url)}")
        return exc

    def _project_exists(self) -> bool:
        return bool(self._conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema_name,)).fetchone())

    def _projects(self) -> list[str]:
        try:
            return [r[0] for r in self._conn.execute("SELECT name FROM public.memstrata_projects")]
        except _psycopg().Error:
            return []

    def projects(self) -> list[str]:
        """Every project this database holds."""
        with self._lock:
            return sorted(self._projects())

    def _migrate(self) -> None:
        psycopg = _psycopg()
        with self._lock:
            try:
                if self._project_exists() and self._version() == PG_SCHEMA_VERSION:
                    # Current: open without a lock or DDL, so a role that may only
                    # write the ledger (a team member's serve) opens it too.
                    return
                with self._conn.transaction():
                    self._conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_NS_MIGRATE,))
                    self._conn.execute(REGISTRY_DDL)
                    self._conn.execute(
                        "INSERT INTO public.memstrata_projects(name, schema_name, created) VALUES (%s, %s, %s) "
                        "ON CONFLICT (name) DO NOTHING", (self.project, self.schema_name, time.time()))
                    self._conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema_name}")
                    version = self._version()
                    if version > PG_SCHEMA_VERSION:
                        raise StoreError(f"{self.location} has index schema v{version}, newer than this "
                                         f"MemStrata's (v{PG_SCHEMA_VERSION}); upgrade MemStrata")
                    for step in range(version, PG_SCHEMA_VERSION):
                        self._conn.execute(PG_MIGRATIONS[step])
                        self._conn.execute(
                            "INSERT INTO meta(key, value) VALUES (%s, %s) "
                            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            (VERSION_KEY, str(step + 1)))
            except psycopg.Error as exc:
                typed = self._typed(exc)
                if typed is exc:
                    raise StoreError(f"cannot prepare {self.location}: {_scrub(str(exc), self.url)}") from None
                raise typed from None

    def _version(self) -> int:
        exists = self._conn.execute("SELECT to_regclass('meta')").fetchone()[0]
        if exists is None:
            return 0
        row = self._conn.execute("SELECT value FROM meta WHERE key = %s", (VERSION_KEY,)).fetchone()
        return int(row[0]) if row else 0

    def _check_version(self) -> None:
        version = self._version()
        if version != PG_SCHEMA_VERSION:
            newer = "newer" if version > PG_SCHEMA_VERSION else "older"
            raise StoreError(f"{self.location} has index schema v{version}, {newer} than this MemStrata's "
                             f"(v{PG_SCHEMA_VERSION}); run memstrata index --store URL with the same version")

    @property
    def user_version(self) -> int:
        with self._lock:
            return self._version()

    # -- transactions -------------------------------------------------------------

    @contextlib.contextmanager
    def write(self, wait: bool = True) -> Iterator[PgConnection]:
        """One write transaction, serialised with every other writer of the project."""
        if self.readonly:
            raise StoreReadOnly("store opened read-only")
        psycopg = _psycopg()
        with self._lock:
            self._reconnect_if_dropped()
            conn = PgConnection(self._conn)
            try:
                self._conn.execute("BEGIN")
                if wait:
                    self._conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_NS_WRITE, _key(self.schema_name)))
                elif not self._conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s)",
                                            (_NS_WRITE, _key(self.schema_name))).fetchone()[0]:
                    self._conn.execute("ROLLBACK")
                    raise StoreBusy("another process is writing the store")
            except psycopg.Error as exc:
                self._rollback()
                raise self._typed(exc) from None
            try:
                yield conn
            except BaseException as exc:
                self._rollback()
                if isinstance(exc, psycopg.Error):
                    raise self._typed(exc) from None
                raise
            else:
                try:
                    self._conn.execute("COMMIT")
                except psycopg.Error as exc:
                    self._rollback()
                    raise self._typed(exc) from None

    def _rollback(self) -> None:
        with contextlib.suppress(Exception):
            if not self._conn.closed and PgConnection(self._conn).in_transaction:
                self._conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def read(self) -> Iterator[PgConnection]:
        """A consistent snapshot for several reads."""
        with self._lock:
            conn = PgConnection(self._conn)
            if not self._conn.closed and conn.in_transaction:  # nested: reuse it
                yield conn
                return
            self._reconnect_if_dropped()
            conn = PgConnection(self._conn)
            self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            try:
                yield conn
            finally:
                self._rollback()

    def execute(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        psycopg = _psycopg()
        with self._lock:
            for attempt in (0, 1):
                conn = PgConnection(self._conn)
                in_txn = not self._conn.closed and conn.in_transaction
                try:
                    return conn.execute(sql, params).fetchall()
                except psycopg.OperationalError as exc:
                    # A dropped connection outside a transaction loses nothing: reconnect once.
                    if attempt or in_txn or not self._reconnect_if_dropped():
                        raise self._typed(exc) from None
                except psycopg.Error as exc:
                    typed = self._typed(exc)
                    if typed is exc:
                        raise
                    raise typed from None
        raise AssertionError("unreachable")

    def connection(self) -> PgConnection:
        return PgConnection(self._conn)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                if self._held:
                    # The server drops a closed connection's locks only once its backend has
                    # exited, a moment after the socket closes: released here, another
                    # process sees them free as soon as close() returns.
                    with contextlib.suppress(Exception):
                        self._conn.execute("SELECT pg_advisory_unlock_all()")
                    self._held.clear()
                with contextlib.suppress(Exception):
                    self._conn.close()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def another(self) -> PgStore:
        """A second connection to the same project (for a thread of its own)."""
        return PgStore(self.url, self.project, readonly=self.readonly, create=False)

    # -- meta -----------------------------------------------------------------

    def data_version(self) -> object:
        """Changes when another connection changed the code index (the generation)."""
        return self.get_meta("code_generation")

    def may_update(self, table: str) -> bool:
        """Whether this role may change rows of ``table``: a team's proxy role writes the ledger only
        (docs/team.md), and a refused statement must not be sent to find that out."""
        if self.readonly:
            return False
        rows = self.execute("SELECT has_table_privilege(current_user, ?, 'UPDATE')",
                            (f"{self.schema_name}.{table}",))
        return bool(rows[0][0])

    def reclaim_free_space(self) -> int:
        """Nothing to do here: PostgreSQL's autovacuum gives dead rows' space back."""
        return 0

    def size_bytes(self) -> int:
        rows = self.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ? AND c.relkind = 'r'",
            (self.schema_name,))
        return int(rows[0][0])

    def integrity_ok(self) -> bool:
        return self.execute("SELECT 1")[0][0] == 1

    # -- derived data (what the SQLite store keeps in files beside it) --------------

    def save_derived(self, name: str, magic: bytes, obj: object) -> bool:
        data = encode_checked(name, magic, obj)
        if data is None or self.readonly:
            return False
        try:
            with self.write() as c:
                c.execute("INSERT INTO derived(name, data) VALUES (?, ?) "
                          "ON CONFLICT(name) DO UPDATE SET data = excluded.data", (name, data))
            return True
        except StoreError as exc:
            log.info("%s not saved: %s", name, exc)
            return False

    def load_derived(self, name: str, magic: bytes) -> object | None:
        rows = self.execute("SELECT data FROM derived WHERE name = ?", (name,))
        return decode_checked(name, magic, bytes(rows[0][0])) if rows else None

    # -- named locks (held by this connection; the server drops them with it) ---------

    def _named(self, name: str) -> tuple[int, int]:
        return _NS_NAMED, _key(f"{self.schema_name}/{name}")

    def try_lock(self, name: str) -> bool:
        with self._lock:
            got = bool(self.execute("SELECT pg_try_advisory_lock(?, ?)", self._named(name))[0][0])
            if got:
                self._held[name] = self._held.get(name, 0) + 1
            return got

    def unlock(self, name: str) -> None:
        with self._lock:
            if self._held.get(name, 0) > 1:
                self._held[name] -= 1
            else:
                self._held.pop(name, None)
            with contextlib.suppress(StoreError, _psycopg().Error):
                self.execute("SELECT pg_advisory_unlock(?, ?)", self._named(name))

    def _retake_locks(self) -> None:
        """A new connection holds none of the old one's locks: take them again,
        so a proxy's session or an index run stays visibly alive after a
        server restart (another process may have taken one meanwhile: said)."""
        for name, depth in list(self._held.items()):
            key = self._named(name)
            for _ in range(depth):
                if not self._conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()[0]:
                    log.warning("after reconnecting, the lock %r is held by another process", name)
                    self._held.pop(name, None)
                    break

    def lock(self, name: str, on_wait=None, timeout: float | None = None) -> bool:
        """Wait for the named lock (polling, so a caller can be told once that it waits)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        warned = False
        while not self.try_lock(name):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if not warned and on_wait is not None:
                on_wait()
                warned = True
            time.sleep(0.1)
        return True

    def locked_elsewhere(self, name: str) -> bool:
        """Whether another connection holds the named lock."""
        with self._lock:
            key = self._named(name)
            held = self.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid = ?::int::oid AND objid = ?::int::oid AND objsubid = 2 AND pid <> pg_backend_pid()",
                (key[0], key[1]))
            return bool(held[0][0])
