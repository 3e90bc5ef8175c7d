"""Projection maintenance: ``sbuf watch`` and ``sbuf gc``.

Both touch only what the Markdown can rebuild.  ``watch`` keeps the selected
store's index caught up while files change; ``gc`` removes the index and the
leftovers of interrupted writes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memstrata.storage.files import is_temp_name

from . import errors, locks
from .core import View
from .errors import SbufError

MIN_INTERVAL_MS = 50
# With a change feed a cycle looks only at the files the kernel reported; now
# and then every file is stat-ed anyway, as a check on the feed (the MCP
# adapter does the same when idle).
FULL_WALK_S = 30.0
INDEX_SUFFIXES = ("", "-wal", "-shm", "-journal")


def _say(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()  # a person (or a test) follows the output live through a pipe


# -- watch --------------------------------------------------------------------------


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C and SIGTERM end the watch between two cycles, never inside a sync."""
    def handler(_signum, _frame) -> None:
        stop.set()
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def cmd_watch(view: View, args) -> int:
    loc = view.selected
    loc.read_config()
    view.watch = True  # the projection follows the change feed where the filesystem has one
    proj = view.projection(loc)
    repo = view.repository(loc)
    interval = max(args.interval_ms, MIN_INTERVAL_MS) / 1000
    stop = threading.Event()
    cycles = 0
    reported: set[str] = set()
    failing: str | None = None
    last_full = time.monotonic()
    with _stop_on_signals(stop):
        while True:
            full = time.monotonic() - last_full >= FULL_WALK_S
            if full:
                last_full = time.monotonic()
            try:
                repo.recover_if_needed()
                report = proj.sync(full=full, strict=True)
            except SbufError as exc:
                # One run: the failure is the answer.  A long watch outlives a
                # busy index or a folder being moved; it says so once and retries.
                if args.once or exc.code == "not_initialized":
                    raise
                if exc.human != failing:
                    _say(f"error: {exc.human}", err=True)
                failing = exc.human
            else:
                failing = None
                if report.changed:
                    _say(f"synced: {report.added} added, {report.updated} updated, {report.removed} removed")
                reported = _report_problems(proj, reported)
            cycles += 1
            if args.once or stop.wait(interval):
                break
    _say(f"Watch cycles: {cycles}")
    return 1 if reported or failing else 0


def _report_problems(proj, reported: set[str]) -> set[str]:
    """Print each invalid file once, while it stays invalid; returns what is invalid now."""
    found = proj.problems()
    now: dict[str, str] = {}
    for path, why in found.invalid:
        now[f"records/{path}"] = why
    for rid, paths in found.duplicates:
        for path in paths:
            now[f"records/{path}"] = f"record id {rid} is used by {len(paths)} files"
    for path, why in sorted(now.items()):
        if path not in reported:
            _say(f"error: invalid canonical record {path}: {why}", err=True)
    return set(now)


# -- gc -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Disposable:
    label: str   # store-relative, never an absolute path
    path: Path
    size: int


def disposables(view: View) -> list[Disposable]:
    """The index and its side files, and temp files of interrupted atomic writes.

    ``projection.lock`` stays: a running reader may hold it, and a new file in
    its place would let two syncs run at once.  ``locks/`` holds only the
    mutation lock (held by gc itself) and a journal, replayed before this runs.
    """
    loc = view.selected
    index = view.projection(loc).index_file()
    found: list[Disposable] = []
    for suffix in INDEX_SUFFIXES:
        path = Path(f"{index}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            st = path.lstat()
            found.append(Disposable(f"index.sqlite3{suffix}", path, st.st_size))
    for folder, dirs, files in os.walk(loc.root):  # never follows symlinked folders
        base = Path(folder)
        rel = base.relative_to(loc.root).as_posix()
        dirs.sort()
        for name in sorted(files):
            if not is_temp_name(name):
                continue
            path = base / name
            with contextlib.suppress(FileNotFoundError):
                st = path.lstat()
                found.append(Disposable(name if rel == "." else f"{rel}/{name}", path, st.st_size))
    return sorted(found, key=lambda d: d.label)


def cmd_gc(view: View, args) -> int:
    loc = view.selected
    proj = view.projection(loc)
    busy = SbufError("conflict", errors.PROJECTION_BUSY)
    # No sync runs while the index goes: a reader mid-sync would write into a
    # deleted file.  Readers that had it open rebuild it on their next read.
    with view.repository(loc).locked(), \
            locks.exclusive(proj.lock_path, wait=locks.PROJECTION_WAIT_S, busy=busy):
        proj.close()
        found = disposables(view)
        removed = 0
        if not args.dry_run:
            for item in found:
                try:
                    item.path.unlink()
                except FileNotFoundError:
                    continue
                except OSError:
                    raise SbufError("internal_error", errors.STORE_FAILED,
                                    f"{item.label} cannot be removed (is the store folder writable?)") from None
                removed += 1
    total = sum(item.size for item in found)
    if args.dry_run:
        _say(f"Reclaimable: {len(found)} files, {total} bytes")
    else:
        _say(f"Reclaimed: {removed} files, {total} bytes")
    for item in found:
        _say(f"{item.label}\t{item.size} bytes")
    return 0


__all__ = ["cmd_watch", "cmd_gc", "disposables", "Disposable", "MIN_INTERVAL_MS"]
