"""The set of open Kura databases (the ``KuraCatalog`` both servers search).

``Library(home, live=True)`` is the daemon's: each registered database is
opened read-write, synced with its folder on a background thread, and
watched; its registry file and database folders are checked every second so
``kura add/remove/edit`` and a folder deleted by hand take effect without a
restart.  ``live=False`` is ``kura mcp``'s: each database is opened read-only
and nothing is watched.

Searches use a second, read-only connection per database, so they never wait
behind an indexing transaction (WAL lets readers and the writer overlap).
A database that cannot be opened is skipped and remembered with the reason;
the others keep serving.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .chunking import DocumentFilter
from memstrata.indexer.watcher import Changes, Watcher
from memstrata.storage import Store, StoreError
from . import store as kura_store

from .indexing import sync_folder, update_paths
from .registry import Entry, Home, KuraError
from .store import KuraDatabase

log = logging.getLogger(__name__)

CHECK_INTERVAL = 1.0


@dataclass
class Database:
    name: str
    folder: Path                  # <home>/<name>
    reader: Store
    writer: Store | None = None   # live only
    root: Path | None = None      # the watched folder (inbox or the PATH given to `kura add`)
    watcher: Watcher | None = None
    flt: DocumentFilter | None = None
    closed: bool = False
    sync_thread: threading.Thread | None = field(default=None, repr=False)

    def close(self) -> None:
        self.closed = True
        if self.watcher is not None:
            self.watcher.stop()
        if self.sync_thread is not None:
            self.sync_thread.join(timeout=30)
        for store in (self.reader, self.writer):
            if store is not None:
                try:
                    store.close()
                except Exception:  # already broken: nothing left to release
                    log.debug("closing %s", self.name, exc_info=True)


def database_root(home: Home, name: str, store: Store) -> Path:
    root = kura_store.get_root(store)
    return Path(root) if root else home.inbox(name)


class Library:
    def __init__(self, home: Home, *, live: bool, follow: bool = False):
        self.home = home
        self.live = live
        # A server with no monitor thread (stdio MCP, which a host keeps running for a whole
        # session) looks at the registry on every call instead: `kura add` and `kura remove`
        # take effect at once there too, and a removed database is never served again.
        self.follow = follow
        self._lock = threading.RLock()
        self._dbs: dict[str, Database] = {}
        self._problems: dict[str, str] = {}
        self._entries: list[Entry] = []
        self._stamp: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None

    # -- KuraCatalog -----------------------------------------------------------------

    def registered(self) -> list[dict[str, str]]:
        self._follow()
        with self._lock:
            return [e.as_dict() for e in self._entries]

    def loaded(self) -> list[str]:
        self._follow()
        with self._lock:
            return [e.db for e in self._entries if e.db in self._dbs]

    def reader(self, name: str) -> Store | None:
        self._follow()
        with self._lock:
            db = self._dbs.get(name)
            return db.reader if db is not None and not db.closed else None

    def problem(self, name: str) -> str | None:
        self._follow()
        with self._lock:
            return self._problems.get(name)

    def problems(self) -> dict[str, str]:
        with self._lock:
            return dict(self._problems)

    def root_of(self, name: str) -> Path | None:
        with self._lock:
            db = self._dbs.get(name)
            return db.root if db is not None else None

    def _follow(self) -> None:
        if self.follow:
            try:
                self.check()
            except Exception as exc:  # noqa: BLE001 - a registry that cannot be read now: serve what is open
                log.error("checking the kura home failed: %s", exc)  # a sentence, never a stack trace

    # -- loading -----------------------------------------------------------------------

    def reload(self) -> None:
        """Bring the open set in line with the registry."""
        with self._lock:
            self._stamp = self.home.registry_stamp()
            try:
                entries = self.home.entries()
            except KuraError as exc:
                log.error("%s", exc)
                return
            self._entries = entries
            wanted = {e.db for e in entries}
            for name in [n for n in self._dbs if n not in wanted]:
                self._unload(name)
            for name in [n for n in self._problems if n not in wanted]:
                del self._problems[name]
            for entry in entries:
                if entry.db not in self._dbs:
                    self._load(entry.db)

    def _load(self, name: str) -> None:
        try:
            folder = self.home.db_dir(name)
        except KuraError as exc:  # a registry entry edited by hand
            self._fail(name, str(exc))
            return
        path = self.home.db_path(name)
        if not folder.is_dir():
            self._fail(name, f"database folder {folder} is missing")
            return
        writer = reader = None
        try:
            if self.live:
                writer = KuraDatabase(path)
            reader = KuraDatabase(path, readonly=True)
            if not kura_store.is_kura_store(reader):
                raise StoreError("it is not a Kura database")
            root = database_root(self.home, name, reader)
        except (StoreError, OSError, Exception) as exc:  # noqa: BLE001 - any failure skips only this db
            for store in (reader, writer):
                if store is not None:
                    store.close()
            # The reason names the file by its role: the Kura home is no folder the user registered,
            # and errors never show paths outside those.
            self._fail(name, "cannot open its index (data.db): " + str(exc).replace(str(path), "data.db"))
            return
        db = Database(name, folder, reader, writer, root)
        self._dbs[name] = db
        self._problems.pop(name, None)
        log.info("loaded %s (%s)", name, root)
        if self.live:
            self._start_live(db)

    def _fail(self, name: str, why: str) -> None:
        self._problems[name] = why
        log.error("database %s skipped: %s", name, why)

    def _unload(self, name: str, why: str | None = None) -> None:
        db = self._dbs.pop(name, None)
        if db is not None:
            db.close()
            log.info("unloaded %s%s", name, f": {why}" if why else "")
        if why:
            self._problems[name] = why

    def _start_live(self, db: Database) -> None:
        assert db.root is not None and db.writer is not None
        if db.root == self.home.inbox(db.name):
            db.root.mkdir(parents=True, exist_ok=True)
        if not db.root.is_dir():
            log.warning("%s: folder %s does not exist; serving the index as it is", db.name, db.root)
            return
        db.flt = DocumentFilter(db.root, reserved=self.home.root)
        watcher = Watcher(db.root, lambda batch, db=db: self._on_changes(db, batch), debounce=0.2,
                          max_delay=2.0)
        try:
            watcher.start()
            db.watcher = watcher
        except Exception as exc:  # inotify limits and the like: still serve, just not live
            log.error("%s: cannot watch %s: %s", db.name, db.root, exc)
        db.sync_thread = threading.Thread(target=self._initial_sync, args=(db,),
                                          name=f"kura-sync-{db.name}", daemon=True)
        db.sync_thread.start()

    def _initial_sync(self, db: Database) -> None:
        try:
            report = sync_folder(db.writer, db.root, db.flt)
            log.info("%s: synced (%d added, %d updated, %d removed, %d unchanged)", db.name,
                     report.added, report.updated, report.removed, report.unchanged)
        except Exception:
            if not db.closed:
                log.exception("%s: indexing %s failed", db.name, db.root)

    def _on_changes(self, db: Database, batch: Changes) -> None:
        if db.closed or not db.root.is_dir():
            return
        try:
            if batch.dirs or any(p.rsplit("/", 1)[-1] == ".gitignore" for p in batch.files):
                db.flt.clear()
                report = sync_folder(db.writer, db.root, db.flt)
            else:
                report = update_paths(db.writer, db.root, batch.files, db.flt)
            if report.changed:
                log.info("%s: %d added, %d updated, %d removed", db.name, report.added,
                         report.updated, report.removed)
        except Exception:
            if not db.closed:
                log.exception("%s: updating after file changes failed", db.name)

    # -- the daemon's monitor ------------------------------------------------------------

    def start_monitor(self) -> None:
        self._monitor = threading.Thread(target=self._watch_home, name="kura-monitor", daemon=True)
        self._monitor.start()

    def check(self) -> None:
        """Pick up registry edits; unload databases whose folder or data.db vanished."""
        with self._lock:
            if self.home.registry_stamp() != self._stamp:
                self.reload()
            for name, db in list(self._dbs.items()):
                if not db.folder.is_dir() or not self.home.db_path(name).exists():
                    self._unload(name, f"database folder {db.folder} was deleted")

    def _watch_home(self) -> None:
        while not self._stop.wait(CHECK_INTERVAL):
            try:
                self.check()
            except Exception:
                log.exception("checking the kura home failed")

    def close(self) -> None:
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
        with self._lock:
            for name in list(self._dbs):
                self._unload(name)
