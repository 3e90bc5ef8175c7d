"""Bring a workspace up to date in the background while the server already answers.

MCP clients give a server a few seconds to answer ``initialize``; building the
index of a large project takes longer than that.  So the server starts
answering at once, ``index_status`` reports ``indexing`` meanwhile, and
``context_query`` waits (bounded) for the catch-up to finish.
"""

from __future__ import annotations

import gc
import logging
import subprocess
import threading
import time
from collections.abc import Callable

from memstrata.compressor import file_counts
from memstrata.compressor.file_counts import Counting, start_counting
from memstrata.indexer.run import IndexCancelled, Progress
from memstrata.indexer.workspace import Workspace
from memstrata.storage import StoreFull, StoreReadOnly

log = logging.getLogger(__name__)

# Characters of a file counted between two looks at whether a question is being answered:
# about 3 ms of encoding (cl100k counts about 10 MB of code a second on one core).
COUNT_STEP_CHARS = 32_000


def settle_heap() -> None:
    """Move what start-up built (the graph, the name index, the tokenizer) out of
    the garbage collector's way: a full collection walks every container
    object, and with a large graph loaded that was a pause of tens of
    milliseconds landing on whichever question happened to trigger it."""
    gc.collect()
    gc.freeze()


class IndexWarmup:
    """Catch-up index, graph load and (optionally) the watcher, on one background thread.

    ``start()`` may be called any number of times; only the first starts the work.
    """

    def __init__(self, ws: Workspace, *, watch: bool = True,
                 progress: Callable[[Progress], None] | None = None):
        self.ws = ws
        self.watch = watch
        self._progress_cb = progress
        self._done = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.progress: Progress | None = None
        self.error: str | None = None
        self.seconds: float | None = None
        # Called between steps of the token counts that follow the catch-up (see quiet.py); the server sets it.
        self.pause: Callable[[], None] | None = None
        self._cancelled = False
        self._counting: Counting | None = None

    def start(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="memstrata-warmup", daemon=True)
            self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the catch-up has finished (successfully or not)."""
        return self._done.wait(timeout)

    def count_files(self, child: subprocess.Popen | None = None) -> None:
        """Start the whole-file token counts (once; see compressor/count_process.py): the
        catch-up calls it, and a server may call it earlier with the counting ``child`` it
        started before it imported the SDK (``memstrata mcp``), so that the child is counting
        by the time the client asks its first question."""
        with self._start_lock:
            if self._counting is None and not self._cancelled:
                self._counting = start_counting(self.ws, pause=self._pause, step_chars=COUNT_STEP_CHARS,
                                                in_child=True, child=child) or Counting()
                return
        if child is not None:  # counting already (or cancelled): this one is not needed
            file_counts.discard_child(child)

    def hold_counts(self) -> None:
        """A question is being answered: a child process counting stops at its next step."""
        counting = self._counting
        if counting is not None:
            counting.hold()

    def release_counts(self) -> None:
        counting = self._counting
        if counting is not None:
            counting.go()

    def _pause(self) -> None:
        if self.pause is not None:  # set by the server, possibly after the counts started
            self.pause()

    def cancel(self) -> None:
        """Stop the catch-up at its next batch (the server is shutting down)."""
        self._cancelled = True
        if self._counting is not None:
            self._counting.stop()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the background thread itself; True when it has ended."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def describe_progress(self) -> str:
        p = self.progress
        if p is None or p.total <= 0:
            return "scanning the project"
        return f"{p.done:,} of {p.total:,} files parsed"

    def _on_progress(self, p: Progress) -> None:
        if self._cancelled:
            raise IndexCancelled
        self.progress = p
        if self._progress_cb is not None:
            self._progress_cb(p)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            if self.watch:
                # Watch first: an edit made while the catch-up runs is then
                # picked up afterwards instead of being missed.
                try:
                    self.ws.start_watching()
                except Exception as exc:  # e.g. inotify limits; serve without live updates
                    log.warning("cannot watch the project for changes (%s); the index will not "
                                "follow edits until the next start", type(exc).__name__)
            if self.ws.store.readonly:  # nothing can be written: answer from the index as it is
                _ = self.ws.graph
                log.info("serving a read-only index as it is")
                return
            summary = self.ws.index(progress=self._on_progress,
                                    on_wait=lambda: log.info("waiting for another MemStrata process "
                                                             "that is indexing this project"))
            # The whole-file token counts start now, beside the graph's load rather than after
            # it, and between questions they wait only while one is answered, not for a tenth of
            # a second without any: a client that starts a server on a freshly indexed project
            # asks at once and back to back, and every file not counted yet was counted on the
            # path of the question that needed it (sympy, 750k lines: 15 MB of its 26 MB, most
            # of it in the first forty questions).  The encoding lets go of the interpreter lock
            # and is made in steps of a few milliseconds (COUNT_STEP_CHARS), so it runs on the
            # core a question leaves free and a question never waits for it.
            self.count_files()
            _ = self.ws.graph  # load it now so the first query does not pay for it
            log.info("index ready: %d files (%d parsed, %d unchanged) in %.1fs",
                     summary.files, summary.parsed, summary.unchanged, time.monotonic() - started)
            settle_heap()
        except IndexCancelled:
            log.info("index catch-up stopped: the server is shutting down")
        except (StoreFull, StoreReadOnly) as exc:
            # The index is as it was and answers, stale; the watcher tries again by itself.
            log.warning("the index could not take the changes made since it was last written: %s; "
                        "answering from it as it is%s", exc,
                        ", and trying again until it can" if self.ws.watching else "")
            _ = self.ws.graph
        except Exception as exc:
            # The workspace records the failure: index_status says "error" and
            # context_query refuses with a clear message.
            self.error = f"indexing failed ({type(exc).__name__})"
            log.error("%s", self.error, exc_info=True)
        finally:
            self.seconds = time.monotonic() - started
            self._done.set()
