"""Keeping a store's SQLite projection in step with its Markdown records.

:meth:`Projection.sync` runs before every read.  It walks ``records/`` and
stats every ``*.md`` file; a file whose size, mtime, ctime and inode match
what was projected is not read at all.  A changed stat means the file is read
and hashed: the same bytes only refresh the stat, new bytes are parsed and
re-projected.  Files gone from disk leave the projection.  A file read within
:data:`RACY_WINDOW_NS` of its last change is marked racy and hashed again on
the next sync, since a second write inside one timestamp tick could leave its
stat unchanged.  A file changed within the last moments that does not parse may be one an
editor is saving in place (truncated, not yet written): it is read again once it changes, for
up to :data:`SAVE_WAIT_S`, so a sync never takes a half-saved file for the record.

Within one process the known states stay in memory and are reloaded only
when another connection has committed (SQLite's ``data_version``), so a
no-change sync is a directory walk and a comparison.

The projection is disposable: a missing, foreign or corrupt index file is
rebuilt from the Markdown.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from memstrata.storage import Store, StoreError, StoreFull
from . import index_db as sb

from . import errors, index_faults, locks
from .chunking import chunk_body, retrieval_text
from .codec import CodecError, parse_record
from .errors import SbufError
from .records import Record, body_digest, format_timestamp, normalize_text
from .stores import StoreLocation
from .watch import ChangeFeed, open_feed

RACY_WINDOW_NS = 2_000_000_000
# How long a process that fell back to an in-memory projection waits before trying the file again.
FILE_RETRY_S = 30.0
# A record file bigger than this is reported invalid without being read.
MAX_RECORD_FILE_BYTES = 8 * 1024 * 1024
# A record file changed this recently that does not parse may be one an editor is saving (truncated,
# not yet written): the sync waits up to SAVE_WAIT_S for it to change, looking every SAVE_POLL_S.
SAVE_WINDOW_NS = 2_000_000_000
SAVE_WAIT_S = 0.5
SAVE_POLL_S = 0.02
_TOO_LARGE, _UNREADABLE = "record file is too large", "record file cannot be read"
_NOT_PARSED = frozenset({_TOO_LARGE, _UNREADABLE})  # errors of a file that was never parsed


@dataclass(slots=True)
class SyncReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    files: int = 0
    invalid: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)


def record_row(record: Record, rel: str) -> sb.RecordRow:
    return sb.RecordRow(
        id=record.id, title=record.title, kind=record.kind, scope=record.scope, status=record.status,
        access=record.access, created_at=format_timestamp(record.created_at),
        updated_at=format_timestamp(record.updated_at), tags=list(record.tags), aliases=list(record.aliases),
        supersedes=list(record.supersedes), sources=[(s.kind, s.reference, s.actor) for s in record.sources],
        body=record.body, norm_title=normalize_text(record.title), norm_body=body_digest(record.body), file=rel)


def project_file(rel: str, data: bytes, state: sb.FileState) -> sb.ProjectedFile:
    try:
        record = parse_record(data)
    except CodecError as exc:
        return sb.ProjectedFile(rel, state, error=str(exc))
    name = rel.rsplit("/", 1)[-1]
    chunks = [sb.ChunkRow(c.ordinal, c.text, retrieval_text(record.title, c.heading, record.aliases,
                                                             record.tags, name, c.text))
              for c in chunk_body(record.body)]
    return sb.ProjectedFile(rel, state, record=record_row(record, rel), chunks=chunks)


def _unreadable_folder(prefix: str, exc: OSError) -> SbufError:
    """A folder below records/ that cannot be listed: its records would silently drop
    out of the projection, so the read fails instead (the CLI names the folder)."""
    return SbufError("internal_error", errors.STORE_FAILED,
                     f"the folder records/{prefix} cannot be read ({exc.strerror or type(exc).__name__}); "
                     "make it readable, or move it out of records/")


def _unavailable(exc: BaseException) -> SbufError:
    full = isinstance(exc, StoreFull) or "disk is full" in str(exc) or "I/O error" in str(exc)
    detail = ("the index could not be written (is the disk full?); it was left as it was" if full else None)
    return SbufError("internal_error", errors.PROJECTION_UNAVAILABLE, detail)


def walk_records(records_dir: Path) -> dict[str, os.stat_result]:
    """Every regular ``*.md`` file below ``records_dir`` (symlinks are not followed)."""
    found: dict[str, os.stat_result] = {}
    pending = [(records_dir, "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            continue
        except OSError as exc:
            raise _unreadable_folder(prefix, exc) from None
        for entry in entries:
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append((Path(entry.path), f"{prefix}{entry.name}/"))
                elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                    found[prefix + entry.name] = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # vanished while we looked
                continue
    return found


def _identity(index: Path) -> tuple:
    """(device, inode) of the index file and of its WAL side files (None when
    missing).  While a connection is open SQLite keeps all three, so a change
    means someone deleted or replaced the projection under it."""
    out = []
    for suffix in ("", "-wal", "-shm"):
        try:
            st = os.stat(f"{index}{suffix}")
        except OSError:
            out.append(None)
        else:
            out.append((st.st_dev, st.st_ino))
    return tuple(out)


def _same_stat(old: sb.FileState, st: os.stat_result) -> bool:
    return (not old.racy and old.mtime_ns == st.st_mtime_ns and old.size == st.st_size
            and old.ctime_ns == st.st_ctime_ns and old.inode == st.st_ino)


def scan_records(records_dir: Path, known: dict[str, sb.FileState]) -> tuple[set[str], list[tuple[str, os.stat_result]]]:
    """(every ``*.md`` file present, those whose stat differs from ``known``): the
    no-change path of a sync, so it stats each file once and builds nothing else."""
    present: set[str] = set()
    changed: list[tuple[str, os.stat_result]] = []
    pending = [(records_dir, "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            # Listing through a folder descriptor makes each stat a lookup of one
            # name rather than of the whole path.
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise _unreadable_folder(prefix, exc) from None
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    name = entry.name
                    try:
                        if not entry.is_file(follow_symlinks=False):
                            if entry.is_dir(follow_symlinks=False):
                                pending.append((folder / name, f"{prefix}{name}/"))
                            continue
                        if not name.endswith(".md"):
                            continue
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # vanished while we looked
                        continue
                    rel = prefix + name if prefix else name
                    present.add(rel)
                    old = known.get(rel)
                    # _same_stat, inlined: this line runs once per record file on every walk
                    if (old is None or old.racy or old.mtime_ns != st.st_mtime_ns or old.size != st.st_size
                            or old.ctime_ns != st.st_ctime_ns or old.inode != st.st_ino):
                        changed.append((rel, st))
        finally:
            os.close(fd)
    return present, changed


class Projection:
    """The projection of one store; keep one per store per process."""

    def __init__(self, loc: StoreLocation, *, watch: bool = False):
        self.loc = loc
        self._watch = watch
        self._feed: ChangeFeed | None = None
        self._store: Store | None = None
        self._path: Path | None = None
        self._identity: tuple | None = None
        # Set when the index was (re)opened: its rows say nothing of what the
        # change feed already reported, so the next sync walks every file.
        self._fresh = True
        self._states: dict[str, sb.FileState] | None = None
        self._version: int | None = None
        self._seq = 0
        self._problems: sb.Problems | None = None
        self._in_memory = False
        self._retry_file_at = 0.0

    # -- the index file ------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return self._index_path().parent / "projection.lock"

    def index_file(self) -> Path:
        """Where this store's projection lives (the preferred place or the private fallback)."""
        return self._index_path()

    def _index_path(self) -> Path:
        if self._path is None:
            try:
                self._path = self.loc.index_path()
            except OSError:
                raise SbufError("internal_error", errors.PROJECTION_UNAVAILABLE) from None
        return self._path

    def store(self, *, strict: bool = False) -> Store:
        """The open projection, (re)opened when its file or a WAL side file was
        deleted or replaced (a person or ``sbuf gc`` removed it, ``sbuf reindex``
        rebuilt it).  When the file cannot be used for a reason outside it (a
        full disk, a folder in its place) the Markdown is projected into memory
        instead, unless ``strict`` (index maintenance, which must say so)."""
        if self._store is not None and self._in_memory:
            if not strict and time.monotonic() < self._retry_file_at:
                return self._store
            self._close_store()  # try the file again
        path = self._index_path()
        if self._store is not None:
            identity = _identity(path)
            if identity == self._identity:
                return self._store
            self._close_store()
            assert self._identity is not None
            if identity[0] is not None and identity[0] == self._identity[0]:
                # The same main file without the WAL it was written with: its
                # pages may be older than the commits it reported, so it is
                # thrown away with the rest.
                with contextlib.suppress(OSError):
                    sb.discard_projection(path)
        if not path.exists() and not path.is_symlink():
            # Side files of a deleted index would be replayed into the new one.
            with contextlib.suppress(OSError):
                sb.discard_projection(path)
        try:
            store = self._open_file(path)
        except (StoreError, OSError, sqlite3.Error) as exc:
            if index_faults.busy(exc):
                raise _unavailable(exc) from None
            index_faults.drop_unused_side_files(path)
            if strict:
                raise _unavailable(exc) from None
            return self._use_memory()
        self._store = store
        self._in_memory = False
        self._identity = _identity(path)
        self._states = None
        self._fresh = True
        return store

    @staticmethod
    def _open_file(path: Path) -> Store:
        try:
            return sb.open_projection(path)
        except StoreError as exc:
            if not index_faults.damaged(exc):
                raise
        # Corrupt or from an incompatible schema: it is only a projection.
        sb.discard_projection(path)
        return sb.open_projection(path)

    def _use_memory(self) -> Store:
        """Project into memory; the index file is left as it is and tried again later."""
        self._close_store()
        try:
            self._store = index_faults.memory_projection()
        except (StoreError, sqlite3.Error):
            raise SbufError("internal_error", errors.PROJECTION_UNAVAILABLE) from None
        self._in_memory = True
        self._retry_file_at = time.monotonic() + FILE_RETRY_S
        self._identity = None
        self._states = None
        self._fresh = True
        return self._store

    def close(self) -> None:
        if self._feed is not None:
            self._feed.close()
            self._feed = None
        self._close_store()

    def _close_store(self) -> None:
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.close()
        self._store = None
        self._states = None
        self._problems = None

    # -- sync ----------------------------------------------------------------------

    def sync(self, *, full: bool = False, strict: bool = False) -> SyncReport:
        """Bring the projection in step with the Markdown.  Raises SbufError.

        With a change feed only the files it reports are looked at, unless
        ``full``: then every file is stat-ed (a host calls that when idle, as
        a check on the feed).  ``strict``: the index file itself must take the
        changes (``sbuf sync``), else the failure is the answer.
        """
        busy = SbufError("conflict", errors.PROJECTION_BUSY)
        try:
            with locks.exclusive(self.lock_path, wait=locks.PROJECTION_WAIT_S, busy=busy):
                try:
                    return self._sync(full=full, strict=strict)
                except (StoreError, sqlite3.Error) as exc:
                    if strict or self._in_memory or index_faults.busy(exc) or index_faults.damaged(exc):
                        raise
                # The file could not take the changes (a full disk): it keeps what
                # it had, and this process reads the Markdown from memory.
                self._use_memory()
                return self._sync(full=True)
        except (StoreError, sqlite3.Error) as exc:
            if index_faults.busy(exc):
                raise busy from None
            raise _unavailable(exc) from None

    def rebuild(self) -> SyncReport:
        """Delete the index file and project every record again."""
        busy = SbufError("conflict", errors.PROJECTION_BUSY)
        try:
            with locks.exclusive(self.lock_path, wait=locks.PROJECTION_WAIT_S, busy=busy):
                self._close_store()
                try:
                    sb.discard_projection(self._index_path())
                except OSError:
                    raise SbufError("internal_error", errors.PROJECTION_UNAVAILABLE) from None
                return self._sync(full=True, strict=True)
        except (sqlite3.Error, StoreError) as exc:
            raise _unavailable(exc) from None

    def _known(self, store: Store) -> dict[str, sb.FileState]:
        """The projected file states, reloading only what another process changed."""
        version = sb.data_version(store)
        if self._states is not None and version == self._version:
            return self._states
        self._version = version
        if self._states is not None:
            changed, latest, total = sb.file_states(store, self._seq)
            self._states.update(changed)
            self._seq = latest
            if len(self._states) == total:  # nothing was deleted meanwhile
                self._note_changes(changed.keys())
                return self._states
        self._states, self._seq, _ = sb.file_states(store)
        self._problems = None
        return self._states

    def _changed_paths(self, full: bool) -> set[str] | None:
        """Paths the change feed saw since the last sync; None when every file must be stat-ed."""
        if not self._watch:
            return None
        if self._feed is None:
            self._feed = open_feed(self.loc.records_dir)
            if self._feed is None:
                self._watch = False  # not a filesystem whose changes inotify reports
                return None
        changed = self._feed.drain()  # always drained, so a full walk resets it too
        return None if full else changed

    def _sync(self, full: bool = False, strict: bool = False) -> SyncReport:
        store = self.store(strict=strict)
        known = self._known(store)
        changed = self._changed_paths(full or self._fresh)
        self._fresh = False
        if changed is None:
            present, candidates = scan_records(self.loc.records_dir, known)
            gone = [rel for rel in known if rel not in present] if len(present) != len(known) or any(
                rel not in known for rel, _ in candidates) else []
        else:
            candidates, gone = [], []
            for rel in changed:
                if not rel.endswith(".md"):
                    continue
                try:
                    st = os.lstat(self.loc.records_dir / rel)
                except OSError:
                    st = None
                if st is not None and stat.S_ISREG(st.st_mode):
                    candidates.append((rel, st))
                elif rel in known:
                    gone.append(rel)
        report = SyncReport()
        upserts: list[sb.ProjectedFile] = []
        touches: list[sb.ProjectedFile] = []
        now = time.time_ns()
        seen: dict[str, sb.ProjectedFile | None] = {}
        for rel, st in candidates:
            old = known.get(rel)
            if old is not None and _same_stat(old, st):
                continue
            seen[rel] = self._read(rel, st, now)
        self._settle(seen, now)
        for rel, projected in seen.items():
            old = known.get(rel)
            if projected is None:  # vanished between the walk and the read
                if old is not None:
                    gone.append(rel)
                continue
            if old is not None and old.hash == projected.state.hash:
                if old != projected.state:
                    touches.append(sb.ProjectedFile(rel, projected.state))
            else:
                upserts.append(projected)
                if old is None:
                    report.added += 1
                else:
                    report.updated += 1
        report.removed = len(gone)
        if upserts or touches or gone:
            sb.apply_changes(store, upserts, touches, gone)
            for rel in gone:
                known.pop(rel, None)
            for f in (*touches, *upserts):
                known[f.path] = f.state
            if upserts or gone:
                self._note_changes([f.path for f in upserts])
        report.files = len(known)
        report.unchanged = report.files - report.added - report.updated
        report.invalid = len(self.problems().invalid)
        return report

    def _settle(self, seen: dict[str, sb.ProjectedFile | None], now: int) -> None:
        """Read again the files just written that did not parse, once their writer is done.

        An editor saving in place truncates the file, then writes it: a sync between the two sees
        an empty or cut-off file, which is no record and must not replace the one being saved.
        Such a file is watched for up to :data:`SAVE_WAIT_S` (one wait for all of them) and read
        again when its stat changes; one that stays as it is is as it was meant to be (invalid).
        """
        waiting = {rel: p for rel, p in seen.items()
                   if p is not None and p.error is not None and p.error not in _NOT_PARSED
                   and max(p.state.mtime_ns, p.state.ctime_ns) >= now - SAVE_WINDOW_NS}
        deadline = time.monotonic() + SAVE_WAIT_S
        while waiting and time.monotonic() < deadline:
            time.sleep(SAVE_POLL_S)
            for rel, before in list(waiting.items()):
                try:
                    st = os.lstat(self.loc.records_dir / rel)
                except OSError:
                    st = None
                if st is None or not stat.S_ISREG(st.st_mode):
                    seen[rel] = None if st is None else before
                    del waiting[rel]
                    continue
                if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) == (
                        before.state.size, before.state.mtime_ns, before.state.ctime_ns, before.state.inode):
                    continue
                again = self._read(rel, st, time.time_ns())
                seen[rel] = again
                if again is None or again.error is None:
                    del waiting[rel]
                else:
                    waiting[rel] = again  # written further, still not whole: wait on

    def _read(self, rel: str, st: os.stat_result, now: int) -> sb.ProjectedFile | None:
        path = self.loc.records_dir / rel
        racy = max(st.st_mtime_ns, st.st_ctime_ns) >= now - RACY_WINDOW_NS
        if st.st_size > MAX_RECORD_FILE_BYTES:
            state = sb.FileState(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, racy,
                                 f"oversized:{st.st_size}:{st.st_mtime_ns}")
            return sb.ProjectedFile(rel, state, error=_TOO_LARGE)
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_RECORD_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError:
            state = sb.FileState(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, True, "unreadable")
            return sb.ProjectedFile(rel, state, error=_UNREADABLE)
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        state = sb.FileState(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, racy, digest)
        return project_file(rel, data, state)

    # -- validity ------------------------------------------------------------------

    def _note_changes(self, paths) -> None:
        """Keep the validity verdict current: a clean store stays clean unless a
        re-projected file is invalid or brought a second copy of an id."""
        if self._problems is None or self._problems:
            self._problems = None  # recomputed in full when next asked
            return
        if paths:
            self._problems = sb.problems_among(self.store(), list(paths))

    def problems(self) -> sb.Problems:
        if self._problems is None:
            self._problems = sb.problems(self.store())
        return self._problems

    def require_valid(self, *, writing: bool) -> None:
        """Refuse to serve a store holding an invalid or duplicate-id file."""
        if self.problems():
            message = errors.VALIDATION_FAILED if writing else errors.RECORDS_INVALID
            raise SbufError("invalid_record", message,
                            "one or more canonical records are invalid; run `sbuf doctor` for details")


__all__ = ["Projection", "SyncReport", "walk_records", "project_file", "record_row", "RACY_WINDOW_NS"]
