"""A project opened for use: its store, index runs, graph and watcher together.

Everything above the indexer (compressor, MCP server, proxy, CLI) works
through a :class:`Workspace`.  It keeps the in-memory graph in step with the
store, whether the store was changed by this process (watcher, index runs)
or by another MemStrata process on the same project.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memstrata.storage import Store, StoreError, StoreFull, StoreReadOnly
from memstrata.storage import code_index as ci

from . import graph_snapshot
from . import history as git_history
from .graph import CodeGraph
from .graph_snapshot import SnapshotGraph
from .graph_view import GraphView
from .project import (
    MAX_FILE_BYTES_LIMIT,
    StoreChoice,
    WatchPresence,
    open_shared_store,
    open_store,
    resolve_root,
    writer_active_elsewhere,
)
from .run import RESOLUTION_META, IndexCancelled, Indexer, IndexSummary, Progress
from .scan import DEFAULT_MAX_FILE_BYTES, scan_project
from .watcher import GIT_EXCLUDE, Changes, Watcher
from .worker import content_hash, read_bytes

log = logging.getLogger(__name__)

SNAPSHOT_DELAY = 5.0  # seconds of quiet after a graph refresh before it is saved
HISTORY_META = "history"  # "<HEAD commit>:<working-tree digest>" of the saved recent history
HEAD_CHECK_SECONDS = 30.0  # how often a long-lived process looks whether HEAD moved (a commit changes no file)


@dataclass
class IndexStatus:
    """The ``index_status`` fields of the API reference, plus detail."""

    project: str
    files_indexed: int
    last_indexed: str | None
    index_size_mb: float
    status: str  # ready | indexing | stale | error
    symbols: int = 0
    syntax_errors: int = 0
    languages: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    message: str | None = None

    def api_fields(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in ("project", "files_indexed", "last_indexed", "index_size_mb", "status")}

    def as_dict(self) -> dict:
        d = asdict(self)
        if d["message"] is None:
            del d["message"]
        return d


class Workspace:
    """``detached``: a shared index read away from its checkout: answers come
    from the store alone (the file texts are in it) and the disk is never read."""

    def __init__(self, root: Path, store: Store, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 workers: int | None = None, *, detached: bool = False):
        self.root = root
        self.store = store
        self.detached = detached
        self.indexer = Indexer(root, store, max_file_bytes=max_file_bytes, workers=workers)
        self.lock = threading.RLock()  # guards the graph
        self._graph: GraphView | None = None  # a CodeGraph, or a SnapshotGraph until the first change
        self._known: dict[str, tuple[str, float]] = {}  # path -> (hash, written at) the graph reflects
        self._data_version: int | None = None
        self._resolution: str | None = None  # the import-resolution digest the graph was built with
        self._snapshot_timer: threading.Timer | None = None
        self._upgrading: threading.Thread | None = None
        # The full graph built behind a snapshot, waiting for the first change (see _upgrade_in_background).
        self._standby: CodeGraph | None = None
        # Called by a background graph build between its steps (see CodeGraph.load); a server sets it.
        self.background_pause: Callable[[], None] | None = None
        self._watcher: Watcher | None = None
        self._indexing = False
        self._error: str | None = None
        self._held_back: str | None = None  # why the latest changes could not be written (a full disk)
        self._store_file = self._file_identity()  # the index file this process opened (see _store_gone)
        self._store_gone_said = False
        # Whether losing the index file is logged here; a command that reports it in its own words
        # (`memstrata watch`) turns this off, so the user reads it once.
        self.log_store_gone = True
        self.listeners: list[Callable[[IndexSummary], None]] = []
        self._history: git_history.RecentChanges | None = None
        self._history_token: str | None = None
        self._commit_history: tuple[str, list] | None = None  # (HEAD, its commits' hunks), read once per HEAD
        self._head_checked = 0.0
        self._history_lock = threading.Lock()

    @classmethod
    def open(cls, path: str | Path | None = None, *, max_file_bytes: int | None = None,
             workers: int | None = None, store: StoreChoice | None = None) -> Workspace:
        """The project at ``path`` (its checkout), indexed into its own SQLite
        file or, with a shared ``store``, into that database under its name."""
        root = resolve_root(path)
        if store is not None and store.shared:
            store = open_shared_store(store, root, create=True)
        else:
            store = open_store(root)
        if max_file_bytes is None:
            saved = store.get_meta("max_file_bytes")
            max_file_bytes = int(saved) if saved and saved.isdigit() else DEFAULT_MAX_FILE_BYTES
        # A cap remembered by an older version may be past the limit; reading files with it would
        # try to allocate that much.
        max_file_bytes = min(max_file_bytes, MAX_FILE_BYTES_LIMIT)
        return cls(root, store, max_file_bytes=max_file_bytes, workers=workers)

    def close(self) -> None:
        self.stop_watching()
        timer = self._snapshot_timer
        if timer is not None:  # edits were followed but not yet saved: save them now
            timer.cancel()
            self._save_snapshot()
        self.store.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- indexing -----------------------------------------------------------

    def index(self, progress: Callable[[Progress], None] | None = None,
              on_wait: Callable[[], None] | None = None) -> IndexSummary:
        """Full catch-up index (cheap when little changed), then refresh the graph."""
        if self.detached:
            raise RuntimeError("a detached workspace has no checkout to index")
        self._indexing = True
        try:
            summary = self.indexer.index_all(progress=progress, on_wait=on_wait)
            self._error = self._held_back = None
        except IndexCancelled:
            raise  # stopped on purpose: the run is left as a killed one is, "interrupted"
        except (StoreFull, StoreReadOnly) as exc:
            # Nothing was written, and the index is as it was: it answers, stale, until the
            # changes fit (a watcher tries again by itself; see watcher.RETRY_FIRST_S).
            self._held_back = str(exc)
            if self._watcher is not None:
                self._watcher.catch_up()
            raise
        except Exception as exc:
            self._error = f"indexing failed: {type(exc).__name__}"
            try:
                self.store.set_meta("status", "error")
            except Exception:  # a full disk or read-only index: the first error is the one to report
                log.debug("could not mark the index as failed", exc_info=True)
            raise
        finally:
            self._indexing = False
        self._after_update(summary)
        if self.store.dialect != "sqlite" and self._graph is None and not self.store.readonly:
            # A shared store's readers are detached and read-only: they can
            # neither save the graph snapshot nor write the references the
            # graph resolves, so the writer does both before it is done.
            _ = self.graph
        return summary

    def _file_identity(self) -> tuple[int, int] | None:
        if self.store.dialect != "sqlite":
            return None
        try:
            st = os.stat(self.store.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    @property
    def index_gone(self) -> bool:
        """Whether the index file this process opened was deleted or replaced since."""
        return self._store_gone()

    def _store_gone(self) -> bool:
        """Whether the index file this process opened was deleted or replaced (`rm -rf .memstrata`,
        a rebuild by another tool): what it would write then goes nowhere anyone reads."""
        if self._store_gone_said:
            return True
        if self._store_file is None or self._file_identity() == self._store_file:
            return False
        self._store_gone_said = True
        if not self.root.exists():
            self._error = ("the project folder was moved or deleted while this process ran; start it again "
                           "in the folder's new place")
        else:
            self._error = ("the index file was deleted or replaced while this process ran; restart it to use "
                           "the index that is there now (or run memstrata index to build one)")
        if self.log_store_gone:
            log.error("%s", self._error)
        return True

    def apply_changes(self, changes: Changes) -> IndexSummary:
        """Re-index what a watcher batch names (files, and everything under dirs)."""
        if self._store_gone():
            return IndexSummary()  # nothing to write to: status says so
        self._adopt_stored_cap()
        paths = set(changes.files)
        if changes.full or any(p == ".gitignore" or p.endswith("/.gitignore") or p == GIT_EXCLUDE for p in paths):
            return self.index()
        if changes.dirs:
            indexed = ci.file_paths(self.store)
            for d in changes.dirs:
                paths.add(d)  # itself: a folder gone or now left out changes the skipped list
                prefix = d + "/"
                paths.update(p for p in indexed if p.startswith(prefix))
                abs_dir = self.root / d
                # A folder link is never walked, as the full scan does not walk one: `os.walk`
                # follows the folder it is given, link or not, and a link to a folder outside the
                # project put the names of every file there in the skipped list.
                if abs_dir.is_dir() and not abs_dir.is_symlink():
                    for dirpath, dirnames, filenames in os.walk(abs_dir):
                        rel_dir = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
                        paths.update(f"{rel_dir}/{f}" for f in filenames)
        try:
            summary = self.indexer.update_paths(paths)
        except (StoreFull, StoreReadOnly) as exc:
            self._held_back = str(exc)  # the watcher keeps the batch and tries again
            raise
        self._held_back = None
        self._after_update(summary)
        return summary

    def _adopt_stored_cap(self) -> None:
        """The file-size cap an index run remembered since this workspace opened (`memstrata index
        --max-file-size` beside a running watcher): a watcher on the old cap would drop the large
        files that run just indexed at their next edit."""
        saved = self.store.get_meta("max_file_bytes")
        if saved and saved.isdigit():
            cap = min(int(saved), MAX_FILE_BYTES_LIMIT)
            if cap != self.indexer.max_file_bytes:
                self.indexer.max_file_bytes = cap
                self.indexer.filter.cap = cap

    def _after_update(self, summary: IndexSummary) -> None:
        if self._graph is not None and summary.imports_repointed:
            # Files no change names now import elsewhere: the graph is built again from the rows
            # when next asked for (a refresh follows only the files it is told of).
            with self.lock:
                self._graph = None
        elif self._graph is not None and (summary.changed_paths or summary.removed_paths):
            with self.lock:
                self._refresh_graph(summary.changed_paths, summary.removed_paths)
        self._update_history(bool(summary.changed_paths or summary.removed_paths))
        for listener in list(self.listeners):
            listener(summary)

    # -- recent history ---------------------------------------------------------

    def _update_history(self, files_changed: bool) -> None:
        """Read again what the recent commits and the working tree changed
        (indexer/history.py) when HEAD moved or indexed files changed, and
        keep it beside the index for every reader.  Best effort: without a
        usable git checkout there is simply no history."""
        if self.detached or self.store.readonly:
            return
        with self._history_lock:
            self._head_checked = time.monotonic()
            try:
                head = git_history.head_commit(self.root)
                saved = self.store.get_meta(HISTORY_META)
                if head is None:
                    if saved:
                        self.store.set_meta(HISTORY_META, "")
                    return
                if saved and saved.split(":", 1)[0] == head and not files_changed:
                    return
                cached = self._commit_history
                changes = cached[1] if cached is not None and cached[0] == head else None
                if changes is None:
                    changes = git_history.commit_changes(self.root, head)
                    if changes is None:
                        return
                    self._commit_history = (head, changes)
                indexed = set(ci.file_paths(self.store))
                found = git_history.recent_changes(self.root, indexed.__contains__, head=head, changes=changes)
                if found is None:
                    return
                token = f"{head}:{found.worktree}"
                if token == saved:
                    return
                if git_history.save(self.store, found):
                    self.store.set_meta(HISTORY_META, token)
            except Exception:  # a full disk, a locked index: ranking goes on without (or with the old) history
                log.debug("recent history not updated", exc_info=True)

    @property
    def history(self) -> git_history.RecentChanges | None:
        """What the project's recent commits and uncommitted edits changed, as
        saved by the last index run (None without a git history)."""
        if (self._watcher is not None and not self.detached
                and time.monotonic() - self._head_checked > HEAD_CHECK_SECONDS):
            # A commit or checkout moves HEAD without changing a file the
            # watcher sees: look again now and then, off the question's path.
            self._head_checked = time.monotonic()
            threading.Thread(target=self._update_history, args=(False,), name="memstrata-history",
                             daemon=True).start()
        try:
            token = self.store.get_meta(HISTORY_META)
        except Exception:
            return self._history
        if token != self._history_token:
            self._history = git_history.load(self.store) if token else None
            self._history_token = token
        return self._history

    # -- graph --------------------------------------------------------------

    @classmethod
    def open_shared(cls, choice: StoreChoice, path: str | Path | None = None, *,
                    readonly: bool = True) -> Workspace:
        """A project in a shared store, read without its checkout (``detached``).

        ``readonly=False`` still never indexes (the checkout's ``index`` or
        ``watch`` does); it lets a proxy record its savings in the store.
        """
        root = Path(path or os.getcwd()).expanduser().absolute()
        store = open_shared_store(choice, root, readonly=readonly, create=False)
        recorded = store.get_meta("project_root")
        if path is None and recorded:
            # No local checkout named: absolute paths are read as the writer's
            # (a checkout named with PATH maps this machine's paths instead).
            root = Path(recorded)
        return cls(root, store, detached=True)

    @property
    def graph(self) -> GraphView:
        """The graph, loaded on first use and caught up with other processes' writes."""
        with self.lock:
            if self._graph is None:
                self._load_graph()
            else:
                self._sync_external()
            assert self._graph is not None
            return self._graph

    def graph_in_step(self) -> GraphView:
        """The graph, caught up also with writes it has not applied yet: this process's own
        watcher commits a batch a moment before it takes the lock to apply it to the graph, and
        a slice renders the graph's line spans over the texts the index holds now."""
        with self.lock:
            graph = self.graph
            if graph.generation is None or ci.code_generation(self.store) == graph.generation:
                return graph
            self._take_store_changes()
            assert self._graph is not None
            return self._graph

    def _load_graph(self) -> None:
        """From the saved snapshot when it matches the store (a fraction of a
        second), else built from rows and saved for the next process."""
        self._standby = None
        with self.store.read():
            self._data_version = self._current_data_version()
            generation = ci.code_generation(self.store)
            self._known = ci.file_versions(self.store)
            self._resolution = self.store.get_meta(RESOLUTION_META)
        graph: GraphView | None = graph_snapshot.load(self.store, generation)
        if graph is None:
            graph = self._graph = CodeGraph.load(self.store)
            self._persist_targets()
            if not self.store.readonly and not self.detached:
                graph_snapshot.save(graph, self.store)
        self._graph = graph
        if isinstance(graph, SnapshotGraph) and self._watcher is not None:
            self._upgrade_in_background()

    def _upgrade_in_background(self) -> None:
        """A process that follows changes wants the full graph (a snapshot
        cannot be refreshed): build it on a thread while the snapshot
        answers, so the first edit does not wait seconds for it.

        It stands by until that edit, and the snapshot goes on answering: the
        two answer byte for byte alike, but the snapshot's adjacency lists are
        decoded from arrays, where the full graph's come from networkx's views
        (each new question walks nodes no earlier one did: on sympy the
        server's p95 was 42 ms on the full graph, 32 ms on the snapshot)."""
        if self._upgrading is not None and self._upgrading.is_alive():
            return

        def build() -> None:
            try:
                full = CodeGraph.load(self.store, pause=self.background_pause)
                if self.background_pause is not None:
                    self.background_pause()  # the lock below is the one questions take
            except ci.RowsMoved:  # written to while read: that change builds the graph itself
                return
            except Exception:  # the first change builds it instead
                log.debug("background graph build failed", exc_info=True)
                return
            with self.lock:
                current = self._graph
                # Kept only if nothing moved meanwhile; otherwise the snapshot
                # already gave way to a graph that follows the change.
                if isinstance(current, SnapshotGraph) and current.generation == full.generation:
                    self._standby = full

        self._upgrading = threading.Thread(target=build, name="memstrata-graph-build", daemon=True)
        self._upgrading.start()

    def _take_standby(self) -> bool:
        """Swap in the full graph built behind the snapshot, if it holds what the snapshot does."""
        full, self._standby = self._standby, None
        current = self._graph
        if full is None or not isinstance(current, SnapshotGraph) or full.generation != current.generation:
            return False
        self._graph = full
        self._persist_targets()
        return True

    def _current_data_version(self) -> object:
        return self.store.data_version()

    def _sync_external(self) -> None:
        version = self._current_data_version()
        if version == self._data_version:
            return
        # Another connection wrote (often only the savings ledger: the code
        # generation then tells, without reading every file's state).  What
        # it changed is read in one snapshot with the generation, and the
        # version stays the one read here: a write landing after this read
        # is caught by the next sync.
        assert self._graph is not None
        if self._graph.generation is not None and ci.code_generation(self.store) == self._graph.generation:
            self._data_version = version
            return
        self._data_version = version
        self._take_store_changes()

    def _take_store_changes(self) -> None:
        """Apply to the graph whatever the index holds that the graph does not, read in one go."""
        if self._resolution_moved():
            # Another process re-resolved the stored imports after an edit of a tsconfig,
            # package.json, go.mod or Cargo.toml: files no change names now import elsewhere,
            # which a refresh of the changed files would not see. Built again, as it would be
            # in the process that made the change.
            self._load_graph()
            return
        generation, states = self._generation_and_states()
        changed = [p for p, h in states.items() if self._known.get(p) != h]
        removed = [p for p in self._known if p not in states]
        if changed or removed:
            self._refresh_graph(changed, removed, (generation, states))
        else:  # no file was written anew (imports re-pointed to what graphs resolve alike): only the label moves
            assert self._graph is not None
            self._graph.generation = generation

    def _resolution_moved(self) -> bool:
        try:
            return self.store.get_meta(RESOLUTION_META) != self._resolution
        except StoreError:
            return False

    def _generation_and_states(self) -> tuple[str | None, dict[str, tuple[str, float]]]:
        with self.store.read():
            return ci.code_generation(self.store), ci.file_versions(self.store)

    def _refresh_graph(self, changed, removed,
                       seen: tuple[str | None, dict[str, tuple[str, float]]] | None = None) -> None:
        """Refresh the graph for ``changed``/``removed`` files; ``seen`` is the
        (generation, file versions) those were worked out from, read before."""
        assert self._graph is not None
        if not isinstance(self._graph, CodeGraph) and not self._take_standby():
            self._load_graph()  # a snapshot is read-only: the first change needs the full graph
            return
        # The label comes from before the rows are read: a write landing
        # meanwhile renews the generation, so the graph (and a snapshot of
        # it) is never labelled newer than what it holds.
        generation, states = seen if seen is not None else self._generation_and_states()
        # Whatever else differs from what the graph holds goes in too (another
        # process's write landing between this one's and this read).
        touched = {*changed, *removed, *(p for p, h in states.items() if self._known.get(p) != h),
                   *(p for p in self._known if p not in states)}
        changed = sorted(p for p in touched if p in states)
        removed = sorted(p for p in touched if p not in states)
        self._graph.refresh(self.store, changed, removed)
        self._graph.generation = generation
        self._known = states
        self._persist_targets()
        self._schedule_snapshot()

    def _schedule_snapshot(self) -> None:
        """Save the refreshed graph once edits pause, so a one-shot query
        started after them does not rebuild it."""
        if self.store.readonly or self.detached:
            return
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
        self._snapshot_timer = threading.Timer(SNAPSHOT_DELAY, self._save_snapshot)
        self._snapshot_timer.daemon = True
        self._snapshot_timer.start()

    def _save_snapshot(self) -> None:
        with self.lock:
            self._snapshot_timer = None
            # Beside an index that is gone, a snapshot would only make a folder nobody reads.
            if self._graph is not None and not self._store_gone():
                graph_snapshot.save(self._graph, self.store)

    def _persist_targets(self) -> None:
        """Write the targets of the references the graph resolves otherwise than their rows say
        (the graph compares with the stored column, so a target that became None or moved is
        written too): the rows then hold what a graph built afresh resolves."""
        # Only a CodeGraph resolves references; a snapshot holds no resolution state.
        graph = self._graph
        rows = graph.take_resolved_targets() if isinstance(graph, CodeGraph) else []
        if rows and not self.store.readonly and not self.detached:
            try:
                with self.store.write() as conn:
                    ci.set_ref_targets(conn, rows)
            except (StoreError, sqlite3.OperationalError) as exc:  # a full disk, a read-only or locked file
                graph.untake_resolved_targets(rows)  # the column catches up at the next write
                log.warning("could not save resolved references (%s); the answers are unaffected", exc)
            except Exception:  # the graph stays right; the column catches up next time
                graph.untake_resolved_targets(rows)
                log.warning("could not persist resolved references", exc_info=True)

    # -- watching -------------------------------------------------------------

    def start_watching(self, debounce: float = 0.05) -> None:
        if self.detached:
            raise RuntimeError("a detached workspace has no checkout to watch")
        if self._watcher is None:
            self._watcher = Watcher(self.root, self.apply_changes, debounce=debounce)
            self._watcher.start()
            WatchPresence(self.root).hold()
            with self.lock:
                if isinstance(self._graph, SnapshotGraph):
                    self._upgrade_in_background()

    def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
            WatchPresence(self.root).release()

    @property
    def watching(self) -> bool:
        return self._watcher is not None

    def behind_disk(self) -> tuple[str, str, str] | None:
        """(status, why, what to do) when the files may hold what the index does not -- files
        changed since the last run and nothing in this process keeps the index in step (a one-shot
        command, the resident query process, ``mcp --no-watch``), or a watcher elsewhere is still
        applying them -- else None.  For an answer that found no definition of a name: the name may
        be new."""
        if self.watching or self.detached:
            return None
        st = self.status()
        if st.status == "stale":
            return ("stale", st.message or "files changed since the last index run",
                    "run memstrata index, then ask again")
        if st.status == "indexing":
            return "indexing", st.message or "an index run is under way", "ask again in a moment"
        return None

    def changed_on_disk(self, paths: Iterable[str]) -> list[str]:
        """Which of ``paths`` (indexed files) differ on disk from their index rows (size or
        modification time), or are gone: what the index shows of them is not the file any more."""
        if self.detached:
            return []
        out = []
        for path, state in ci.file_states_of(self.store, paths).items():
            try:
                st = os.stat(self.root / path)
            except OSError:
                out.append(path)
                continue
            if st.st_size != state.size or (st.st_mtime_ns != state.mtime_ns and not self._same_text(path, state)):
                out.append(path)
        return sorted(out)

    def _same_text(self, path: str, state) -> bool:
        """Whether the file at ``path`` still holds the bytes indexed for it: a checkout, a `touch` or
        an editor saving unchanged text moves the modification time alone."""
        data = read_bytes(str(self.root / path), path, max(state.size, 0))
        return isinstance(data, bytes) and content_hash(data) == state.hash

    # -- status -----------------------------------------------------------------

    def quick_status(self) -> str:
        """ready | indexing | stale | error, without counting or looking at the disk."""
        if self._store_gone():
            return "error"
        meta_status = self.store.get_meta("status")
        if self._error or meta_status == "error":
            return "error"
        if self._held_back:
            return "stale"
        if self._indexing or (self._watcher is not None and self._watcher.pending):
            return "indexing"
        if meta_status == "indexing" or meta_status is None:
            return "indexing" if writer_active_elsewhere(self.root, self.store) else "stale"
        return "ready"

    def files_indexed(self) -> int:
        return self.store.execute("SELECT count(*) FROM files")[0][0]

    def status(self, check_disk: bool | None = None) -> IndexStatus:
        """Index state; ``check_disk`` compares the index with the files on disk
        (default: only when no watcher keeps them in step)."""
        self._store_gone()
        meta_status = self.store.get_meta("status")
        counts = ci.status_counts(self.store)
        st = IndexStatus(
            project=self.store.project if self.detached else str(self.root),
            files_indexed=sum(counts.values()),
            last_indexed=self.store.get_meta("last_indexed"),
            index_size_mb=round(self.store.size_bytes() / (1024 * 1024), 2),
            status="ready",
            symbols=self.store.execute("SELECT count(*) FROM symbols")[0][0],
            syntax_errors=counts.get("syntax_error", 0),
            languages=ci.language_counts(self.store),
            skipped=ci.skipped_counts(self.store),
        )
        if self._error or meta_status == "error":
            st.status, st.message = "error", self._error or "the last index run failed"
        elif self._held_back:
            st.status, st.message = "stale", self._held_back
        elif self._indexing or (self._watcher is not None and self._watcher.pending):
            st.status = "indexing"
        elif meta_status == "indexing" or meta_status is None:
            if writer_active_elsewhere(self.root, self.store):
                st.status, st.message = "indexing", "another MemStrata process is indexing"
            else:
                st.status, st.message = "stale", self._unfinished_message(meta_status, st)
        elif not self.detached and (check_disk or (check_disk is None and self._watcher is None)):
            if self._disk_differs():
                if WatchPresence(self.root).held_elsewhere():
                    st.status, st.message = "indexing", "a watcher is applying file changes"
                else:
                    st.status, st.message = "stale", "files changed since the last index run"
        return st

    def _unfinished_message(self, meta_status: str | None, st: IndexStatus) -> str:
        """What a run that never reached its end left behind (killed, or the machine went down)."""
        if meta_status is None:
            return "never indexed"
        files = f"{st.files_indexed:,} file{'' if st.files_indexed == 1 else 's'}"
        if st.last_indexed is None:
            return f"the first index run was interrupted after {files}; run memstrata index to finish it"
        started = self.store.get_meta("index_started")
        return (f"the last index run{f' (started {started})' if started else ''} was interrupted; "
                f"{files} indexed, some may be out of date; run memstrata index to finish it")

    def _disk_differs(self) -> bool:
        scan = scan_project(self.root, self.indexer.max_file_bytes)
        states = ci.file_states(self.store)
        # The scan also lists files that the run skipped only on reading them
        # (binary, unreadable, vanished): they are accounted for unless their
        # size changed since.
        skipped = dict(self.store.execute("SELECT path, size FROM skipped"))
        seen = 0
        for c in scan.files:
            s = states.get(c.path)
            if s is None:
                if c.path in skipped and skipped[c.path] in (None, c.size):
                    continue
                return True
            if s.size != c.size or (s.mtime_ns != c.mtime_ns and not self._same_text(c.path, s)):
                return True
            seen += 1
        return seen != len(states)
