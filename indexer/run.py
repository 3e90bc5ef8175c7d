"""Index runs: a full (cold or catch-up) index and incremental path updates."""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from memstrata.storage import Store, StoreError
from memstrata.storage import code_index as ci

from .imports import ResolveContext, build_resolve_context, is_resolution_config, resolve_import
from .languages import language_for_path
from .model import ImportFact
from .parse import EXTRACTOR_VERSION, warm_queries
from .project import writer_lock
from .scan import (DEFAULT_MAX_FILE_BYTES, NOT_A_FILE, PARSE_TIMEOUT, UNREADABLE, PathFilter, link_target,
                   printable_path, scan_project)
from .worker import (
    Parsed, Skipped, content_hash, init_worker, parse_bytes, process_batch, read_bytes,
)

RESOLUTION_META = "resolution_configs"  # the config digest the stored import targets were resolved with

_BATCH_FILES = 24  # files per worker task
_COMMIT_FILES = 200  # files per write transaction during a full run
_INLINE_BELOW = 48  # fewer changed files than this: parse in-process

log = logging.getLogger(__name__)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class IndexCancelled(Exception):
    """Raised by a progress callback to stop an index run between batches (a server shutting
    down): the files written so far stay, and the next run finishes the job."""


@dataclass(slots=True)
class Progress:
    done: int
    total: int
    path: str


@dataclass
class IndexSummary:
    files: int = 0  # files in the index after the run
    parsed: int = 0
    unchanged: int = 0
    removed: int = 0
    syntax_errors: int = 0  # of the files this run parsed
    files_with_syntax_errors: int = 0  # in the index after the run, like ``files`` (a full run only)
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    changed_paths: list[str] = field(default_factory=list)
    removed_paths: list[str] = field(default_factory=list)
    # import targets of unchanged files moved (a configuration file changed what they resolve to)
    imports_repointed: bool = False


ProgressFn = Callable[[Progress], None]


class Indexer:
    """Brings a project's store in line with the files on disk."""

    def __init__(self, root: Path, store: Store, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 workers: int | None = None):
        self.root = root
        self.store = store
        self.max_file_bytes = max_file_bytes
        self.workers = workers or os.cpu_count() or 1
        self.filter = PathFilter(root, max_file_bytes)
        self.links: dict[str, set[str]] = {}  # a file inside the project -> the indexed symlinks to it
        self.lock = writer_lock(root, store)
        self._ctx: ResolveContext | None = None

    # -- full run -------------------------------------------------------------

    def index_all(self, progress: ProgressFn | None = None, on_wait: Callable[[], None] | None = None) -> IndexSummary:
        self.lock.acquire(on_wait=on_wait)
        try:
            return self._index_all(progress)
        finally:
            self.lock.release()

    def _index_all(self, progress: ProgressFn | None) -> IndexSummary:
        t0 = time.perf_counter()
        summary = IndexSummary()
        self.store.set_meta("status", "indexing")
        self.store.set_meta("index_started", now_iso())
        self.filter.clear()
        scan = scan_project(self.root, self.max_file_bytes)
        self.links = {}
        for c in scan.files:
            if c.link_to is not None:
                self.links.setdefault(c.link_to, set()).add(c.path)
        states = ci.file_states(self.store)
        # Facts written by another version of the extraction are re-derived.
        refresh_all = self.store.get_meta("extractor") != EXTRACTOR_VERSION
        if refresh_all and not states:
            # A fresh index: whatever a killed run commits is current.
            self.store.set_meta("extractor", EXTRACTOR_VERSION)
        on_disk = {c.path for c in scan.files}
        removed = sorted(set(states) - on_disk)
        to_parse = []
        touched: list[tuple[int, str]] = []
        # A file the parser could not finish in time is tried again only once its size changes:
        # trying costs its whole deadline on every run.
        timed_out = {} if refresh_all else {p: size for p, reason, size in ci.skipped_files(self.store)
                                            if reason == PARSE_TIMEOUT}
        parse_skipped: list[tuple[str, str, int | None]] = []
        for c in scan.files:
            if timed_out.get(c.path) == c.size and c.path not in states:
                parse_skipped.append((c.path, PARSE_TIMEOUT, c.size))
                continue
            st = states.get(c.path)
            if st is not None and st.size == c.size and not refresh_all:
                if st.mtime_ns == c.mtime_ns:
                    summary.unchanged += 1
                    continue
                data = read_bytes(str(self.root / c.path), c.path, self.max_file_bytes)
                if isinstance(data, bytes) and content_hash(data) == st.hash:
                    touched.append((c.mtime_ns, c.path))
                    summary.unchanged += 1
                    continue
            to_parse.append(c)
        self._ctx = build_resolve_context(self.root, sorted(on_disk))
        with self.store.write() as conn:
            ci.delete_files(conn, removed)
            conn.executemany("UPDATE files SET mtime_ns = ? WHERE path = ?", touched)
        summary.removed = len(removed)
        summary.removed_paths = removed

        with ci.bulk_load(self.store, cold=not states):
            self._parse_and_store(to_parse, summary, parse_skipped, progress)
        rewritten = sum(1 for p in summary.changed_paths if p in states)
        if rewritten >= max(ci.REWRITE_FILES_TO_MERGE, ci.REWRITE_SHARE_TO_MERGE * len(states)):
            try:
                with self.store.write() as conn:
                    ci.merge_search_segments(conn)
            except StoreError as exc:  # a full disk: the search answers the same, a little slower
                log.warning("the symbol search was not merged after rewriting %d files (%s)", rewritten, exc)

        new_files = any(p not in states for p in summary.changed_paths)
        configs_moved = self._configs_moved()
        if (removed or new_files or configs_moved) and summary.unchanged:
            # Files parsed in this run were resolved against the new file set;
            # only the untouched ones can hold stale targets.
            self._reresolve_imports(exclude=set(summary.changed_paths))
            summary.imports_repointed = configs_moved
        with self.store.write() as conn:
            ci.replace_skipped(conn, scan.skipped + parse_skipped)
            self.store.set_meta("status", "ready", conn)
            self.store.set_meta("last_indexed", now_iso(), conn)
            self.store.set_meta("project_root", str(self.root), conn)
            self.store.set_meta("max_file_bytes", str(self.max_file_bytes), conn)
            self.store.set_meta("extractor", EXTRACTOR_VERSION, conn)
            self.store.set_meta(RESOLUTION_META, self._ctx.config_digest(), conn)
        self._give_back_space(summary)
        summary.skipped = ci.skipped_counts(self.store)
        counts = ci.status_counts(self.store)
        summary.files = sum(counts.values())
        summary.files_with_syntax_errors = counts.get("syntax_error", 0)
        summary.seconds = time.perf_counter() - t0
        return summary

    def _parse_and_store(self, todo, summary: IndexSummary, skipped: list, progress: ProgressFn | None) -> None:
        total = len(todo)
        if not total:
            return
        items = [(c.path, c.language) for c in todo]
        batches = [items[i : i + _BATCH_FILES] for i in range(0, total, _BATCH_FILES)]
        root = str(self.root)
        done = 0
        pending: list[Parsed | Skipped] = []

        def flush() -> None:
            if pending:
                self._write_outcomes(pending, summary, skipped)
                pending.clear()

        with contextlib.ExitStack() as stack:
            if total < _INLINE_BELOW or self.workers <= 1:
                results = (process_batch((root, b, self.max_file_bytes)) for b in batches)
            else:
                # fork is cheapest but unsafe once other threads exist (a watcher,
                # a server loop); forkserver is the safe fallback there.
                method = "fork" if threading.active_count() == 1 else "forkserver"
                if method == "fork":
                    # Compiling a language's query costs about as much as parsing a few dozen small
                    # files: done once here, every forked worker inherits it instead of each
                    # compiling its own.
                    warm_queries({language for _, language in items})
                    # No other thread runs (see above), so the collector's settings are this run's
                    # to change for its duration.
                    stack.enter_context(_no_collections())
                ctx = multiprocessing.get_context(method)
                executor = ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=ctx,
                    initializer=init_worker, initargs=(self._ctx, os.getpid()),
                )
                stack.callback(executor.shutdown, wait=True, cancel_futures=True)  # before the collector resumes
                results = executor.map(process_batch, [(root, b, self.max_file_bytes) for b in batches])
            for outcomes in results:
                pending.extend(outcomes)
                done += len(outcomes)
                if progress is not None:
                    try:
                        progress(Progress(done, total, _outcome_path(outcomes[-1])))
                    except IndexCancelled:
                        flush()  # what was parsed is kept: the next run does not parse it again
                        raise
                if len(pending) >= _COMMIT_FILES:
                    flush()
            flush()

    def _write_outcomes(self, outcomes: list[Parsed | Skipped], summary: IndexSummary, skipped: list) -> None:
        ctx = self._ctx
        with self.store.write() as conn:
            parsed = []
            for o in outcomes:
                if isinstance(o, Skipped):
                    ci.set_skipped(conn, o.path, o.reason, o.size)
                    skipped.append((o.path, o.reason, o.size))
                    continue
                rec = o.record
                imports = o.imports
                if not o.resolved:
                    imports = [(*row, resolve_import(rec.language, ImportFact(*row), rec.path, ctx))
                               for row in imports]
                parsed.append((rec, o.text, o.symbols, o.refs, imports, o.fts_rows))
                summary.parsed += 1
                summary.changed_paths.append(rec.path)
                if rec.status == "syntax_error":
                    summary.syntax_errors += 1
            ci.write_files(conn, parsed)

    def _configs_moved(self) -> bool:
        """Whether the configuration files tell resolution something else than they did when the
        stored targets were resolved (never for an index that has not recorded it yet)."""
        stored = self.store.get_meta(RESOLUTION_META)
        return stored is not None and self._ctx is not None and stored != self._ctx.config_digest()

    def _reresolve_imports(self, exclude: set[str] = frozenset()) -> None:
        """New or removed files can change where other files' imports point."""
        rows = self.store.execute(
            "SELECT i.id, f.language, f.path, i.module, i.name, i.alias, i.line, i.target_path "
            "FROM imports i JOIN files f ON f.id = i.file_id"
        )
        updates = []
        for iid, lang, path, module, name, alias, line, old in rows:
            if path in exclude:
                continue
            new = resolve_import(lang, ImportFact(module, name, alias, line), path, self._ctx)
            if new != old:
                updates.append((new, iid))
        if updates:
            with self.store.write() as conn:
                ci.set_import_targets(conn, updates)

    # -- incremental ----------------------------------------------------------

    def _give_back_space(self, summary: IndexSummary) -> None:
        """After a run or batch that deleted rows, the file's free pages when they are many."""
        if not (summary.removed or summary.changed_paths):
            return
        given = self.store.reclaim_free_space()
        if given:
            log.info("gave %d MB of free index pages back to the file system", given >> 20)

    def _with_links(self, paths: set[str]) -> list[str]:
        """``paths`` and the indexed symlinks that lead to one of them: a link's text is its
        target's, so an edit of the target is an edit of the link (no event names the link)."""
        for rel in paths:  # links made or replaced since the last full scan
            abs_path = self.root / rel
            if abs_path.is_symlink() and (target := link_target(self.root, str(abs_path))) is not None:
                self.links.setdefault(target, set()).add(rel)
        extra = {link for rel in paths for link in self.links.get(rel, ())}
        return sorted(paths | extra)

    def update_paths(self, paths: Iterable[str]) -> IndexSummary:
        """Re-index the given project-relative paths (changed, created or deleted)."""
        t0 = time.perf_counter()
        summary = IndexSummary()
        paths = self._with_links(set(paths))
        if not paths:
            return summary
        with self.lock:
            states = ci.file_states(self.store)
            outcomes: list[Parsed | Skipped] = []
            gone: list[str] = []
            # The skipped list kept as a full scan would list it: what a path now is, and no
            # entry for a path (or a folder's paths) that is no more.
            excluded: list[tuple[str, str]] = []
            vanished: list[str] = []
            for rel in paths:
                abs_path = self.root / rel
                if abs_path.is_dir() and not abs_path.is_symlink():
                    entry = self.filter.folder_entry(rel)
                    if entry is not None:
                        vanished.append(rel)  # a folder left out is listed alone, not its files
                else:
                    entry = self.filter.excluded_entry(rel)
                    if not os.path.lexists(abs_path):
                        vanished.append(rel)
                        entry = None
                    elif entry is None and abs_path.is_symlink() and not abs_path.exists():
                        entry = (rel, UNREADABLE)  # a dangling link or a loop, as the walk lists it
                    elif entry is None and not abs_path.is_file() and not abs_path.is_dir():
                        entry = (rel, NOT_A_FILE)  # a FIFO or socket named like source, as the walk lists it
                if entry is not None or not abs_path.is_file():
                    if rel in states:
                        gone.append(rel)
                    if entry is not None and entry[0] is not None:
                        excluded.append((entry[0], entry[1]))
                    continue
                try:
                    st = abs_path.stat()
                except OSError:
                    if rel in states:
                        gone.append(rel)
                    continue
                if st.st_size > self.max_file_bytes:
                    outcome: Parsed | Skipped = Skipped(rel, "too_large", st.st_size)
                else:
                    data = read_bytes(str(abs_path), rel, self.max_file_bytes)
                    if isinstance(data, Skipped):
                        outcome = data
                    elif (old := states.get(rel)) is not None and old.hash == content_hash(data):
                        summary.unchanged += 1
                        continue
                    else:
                        outcome = parse_bytes(rel, language_for_path(rel), data, st.st_mtime_ns)
                if isinstance(outcome, Skipped) and rel in states:
                    gone.append(rel)  # indexed before, skipped now (grew too large, became binary)
                outcomes.append(outcome)
            new_paths = [o.record.path for o in outcomes if isinstance(o, Parsed) and o.record.path not in states]
            configs_moved = False
            if (new_paths or gone or self._ctx is None
                    or any(is_resolution_config(p) for p in paths)):
                all_paths = set(states) - set(gone) | set(new_paths)
                self._ctx = build_resolve_context(self.root, sorted(all_paths))
                configs_moved = self._configs_moved()
            if gone:
                with self.store.write() as conn:
                    ci.delete_files(conn, gone)
                summary.removed = len(gone)
                summary.removed_paths = gone
            skipped: list = []
            if outcomes:
                self._write_outcomes(outcomes, summary, skipped)
            if excluded or vanished:
                with self.store.write() as conn:
                    ci.forget_skipped(conn, [printable_path(p) for p in vanished])  # as they were listed
                    for rel, reason in excluded:
                        ci.set_skipped(conn, rel, reason, None)
            if new_paths or gone or configs_moved:
                self._reresolve_imports()
            if configs_moved:
                self.store.set_meta(RESOLUTION_META, self._ctx.config_digest())
                summary.imports_repointed = True
            if summary.parsed or summary.removed:
                self.store.set_meta("last_indexed", now_iso())
            self._give_back_space(summary)
        summary.seconds = time.perf_counter() - t0
        return summary


@contextlib.contextmanager
def _no_collections():
    """The cyclic collector paused for a bulk load in a process with no other thread.  The
    writer unpickles and builds millions of row tuples, which make no cycles and which reference
    counting frees once written: the collector only walked them, over and over as they aged
    through its generations (about 0.1 s of a 500k-line project's run, 500 collections).  The
    few cycles the pool's bookkeeping leaves are collected when the run ends."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _outcome_path(o: Parsed | Skipped) -> str:
    return o.record.path if isinstance(o, Parsed) else o.path
