"""Whole-file token counts, worked out in the background once the index is up to date.

Every slice reports ``baseline_tokens``, the tokens of the complete files it
draws on; a file nobody has counted yet costs its query a full encoding of
the file (milliseconds for a large module), which is most of what makes a
new question slow on a long-running server.  The index keeps a count once
made (``files.tokens``), so a server counts the rest while no question is
being answered, once per content: later processes find them saved.

Not during ``memstrata index``: encoding a whole project costs about a
third of what its cold index does in CPU (sympy: 2.6 s against 8.7 s, on
cores the parse workers already fill), and the cold index is a goal of its
own (bench/index_speed.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable

from memstrata.indexer.workspace import Workspace
from memstrata.storage import StoreBusy, StoreError
from memstrata.storage import code_index as ci

from . import count_process
from .slice import file_tokens, remember_file_tokens, remembered_file_tokens
from .text_cache import for_store as texts_for_store
from .tokens import count_tokens, exact_parts

log = logging.getLogger(__name__)

BATCH = 32  # files counted and saved together
BATCH_BYTES = 1_000_000  # ... at most about this much text (one read of a batch holds the interpreter lock)
BUSY_PAUSE_S = 0.5  # another process is writing: try again after this
CHILD_STEP_CHARS = 32_000  # a child's steps when the caller names none: about 3 ms of encoding


def count_missing(ws: Workspace, stop: threading.Event | None = None,
                  pause: Callable[[], None] | None = None, step_chars: int | None = None) -> int:
    """Count and save every indexed file's whole-text tokens that the index
    lacks; returns how many were saved.  Stops early on ``stop``, and for good
    when the store cannot be written (read-only, a reader's role).  ``pause``
    is called before each file (a server's: give way to a question being
    answered), and with ``step_chars`` also between parts of about that many
    characters of a longer file, which are counted apart (exactly: see
    :func:`tokens.exact_parts`).

    Files a question draws on by default (not tests) first, largest first:
    the questions asked meanwhile count what this has not reached yet
    themselves, and a large file is both the likelier to be drawn on (it
    holds more definitions) and the longer to count.  A count made here is
    also remembered in this process (the slices' memo, the kept file texts),
    so a question finds it without reading the index again."""
    store = ws.store
    try:
        if not store.may_update("files"):
            return 0
    except StoreError as exc:
        log.debug("file token counts: %s", exc)
        return 0
    texts = texts_for_store(store)
    saved = 0
    tried: set[str] = set()  # a file rewritten between its reading and its saving is left to its next reader
    while stop is None or not stop.is_set():
        if pause is not None:
            pause()
        try:
            todo = [(p, size) for p, size in ci.uncounted_files(store) if p not in tried]
        except StoreError as exc:
            log.debug("file token counts: %s", exc)
            return saved
        if not todo:
            return saved
        for k, batch in enumerate(count_process.batches(todo, BATCH, BATCH_BYTES)):
            if pause is not None and k:
                # Reading a batch's texts holds the interpreter: it gives way first, as each file does.
                pause()
            tried.update(batch)
            try:
                found = ci.file_texts_counted(store, batch)
            except StoreError as exc:
                log.debug("file token counts: %s", exc)
                return saved
            rows = []
            for j, path in enumerate(batch):
                if stop is not None and stop.is_set():
                    break
                row = found.get(path)
                if row is None or row[2] is not None:  # dropped, or counted by a question meanwhile
                    continue
                if pause is not None and j:
                    # Each file gives way on its own: a batch of large files is a tenth
                    # of a second or more of a core that requests would wait for.
                    pause()
                text, digest, _ = row
                n = _count(path, text, pause, step_chars, stop)
                if n is None:  # stopped
                    break
                rows.append((n, path, digest))
            if rows and not _save(store, rows, stop):
                return saved
            for tokens, path, digest in rows:
                texts.counted(path, digest, tokens)
            saved += len(rows)
            if stop is not None and stop.is_set():
                return saved
    return saved


def _count(path: str, text: str, pause: Callable[[], None] | None, step_chars: int | None,
           stop: threading.Event | None) -> int | None:
    """``text``'s whole count, made in parts of about ``step_chars`` characters with ``pause``
    between them; None when ``stop`` was set meanwhile."""
    if step_chars is None or len(text) <= step_chars:
        return file_tokens(path, text)
    n = 0
    for i, part in enumerate(exact_parts(text, step_chars)):
        if i:
            if pause is not None:
                pause()
            if stop is not None and stop.is_set():
                return None
            known = remembered_file_tokens(path, text)
            if known is not None:  # a question that needed it counted it meanwhile
                return known
        n += count_tokens(part)
    remember_file_tokens(path, text, n)
    return n


def _save(store, rows: list[tuple[int, str, str]], stop: threading.Event | None) -> bool:
    """Save counted rows, waiting while another process writes; False when they cannot be saved."""
    while True:
        try:
            with store.write(wait=False) as conn:
                ci.set_file_tokens(conn, rows)
            return True
        except StoreBusy:
            if stop is not None and stop.wait(BUSY_PAUSE_S):
                return False
            if stop is None:
                time.sleep(BUSY_PAUSE_S)
        except StoreError as exc:  # read-only for this role, a full disk: counting can wait
            log.debug("file token counts not saved: %s", exc)
            return False


class Counting:
    """The background counts of one workspace (see :func:`start_counting`): ``stop()`` ends them;
    ``hold()`` and ``go()`` say when a question starts and ends being answered (a child process
    counting then stops between its steps; this process's own counting thread gives way through
    its ``pause``)."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.child: subprocess.Popen | None = None
        self.stopped = threading.Event()
        self._held = False
        self._lock = threading.Lock()

    def stop(self) -> None:
        self.stopped.set()
        self.end_child()

    def end_child(self) -> None:
        with self._lock:
            child = self.child
            if child is not None and child.stdin is not None:
                with contextlib.suppress(OSError):
                    child.stdin.close()  # the child's cue to end (see count_process)

    def hold(self) -> None:
        self._say(True)

    def go(self) -> None:
        self._say(False)

    def adopt(self, child: subprocess.Popen) -> None:
        """The child counting for this process: told at once whether a question is being answered."""
        if child.stdin is not None:
            os.set_blocking(child.stdin.fileno(), False)
        with self._lock:
            self.child = child
            stopped = self.stopped.is_set()
        if stopped:
            self.stop()
        elif self._held:
            self._say(True)

    def _say(self, held: bool) -> None:
        with self._lock:
            self._held = held
            child = self.child
            if child is None or child.stdin is None or child.stdin.closed:
                return
            # One byte on a pipe the child keeps reading, never blocking a question: a child that
            # cannot take it (stopped, gone) just misses the word.
            with contextlib.suppress(OSError, ValueError):
                os.write(child.stdin.fileno(), count_process.HOLD if held else count_process.GO)


def start_counting(ws: Workspace, pause: Callable[[], None] | None = None,
                   step_chars: int | None = None, *, in_child: bool = False,
                   child: subprocess.Popen | None = None) -> Counting | None:
    """:func:`count_missing` on a daemon thread, giving way to questions
    through ``pause`` (the encoding releases the interpreter lock, the
    Python around it does not).  With ``in_child`` the files are counted
    first by a child process (count_process.py) when the index is a local
    file this process may write; this thread then only saves what the child
    sends, and counts whatever is left once the child has ended.  ``child``:
    such a child started already (:func:`count_process.spawn` of this index)."""
    if ws.store.readonly:
        if child is not None:
            discard_child(child)
        return None
    counting = Counting()

    def run() -> None:
        try:
            n = 0
            if child is not None or (in_child and ws.store.dialect == "sqlite"):
                n += _take_child_counts(ws, counting, pause, step_chars or CHILD_STEP_CHARS, child)
            if not counting.stopped.is_set():
                n += count_missing(ws, stop=counting.stopped, pause=pause, step_chars=step_chars)
            if n:
                log.info("saved the token counts of %d files", n)
        except Exception:  # the workspace closed under it, a damaged row: queries count what they need
            log.debug("background file token counts stopped", exc_info=True)

    counting.thread = threading.Thread(target=run, name="memstrata-file-counts", daemon=True)
    counting.thread.start()
    return counting


def _take_child_counts(ws: Workspace, counting: Counting, pause: Callable[[], None] | None,
                       step_chars: int, child: subprocess.Popen | None) -> int:
    """Save the counts a child process makes of the index's uncounted files; how many were saved."""
    store = ws.store
    try:
        if not store.may_update("files"):
            if child is not None:
                discard_child(child)
            return 0
        if child is None:
            if not ci.any_uncounted(store):
                return 0  # all counted (a server started again): no process to start for nothing
            child = count_process.spawn(store.path, step_chars)
    except (OSError, StoreError) as exc:  # no interpreter to start, no process left: this thread counts
        log.debug("file token counts in a child process: %s", exc)
        return 0
    counting.adopt(child)
    texts = texts_for_store(store)
    saved = 0
    try:
        assert child.stdout is not None
        for line in child.stdout:
            try:
                rows = [(int(n), str(path), str(digest)) for n, path, digest in json.loads(line)]
            except (ValueError, TypeError):
                break
            if pause is not None:
                pause()  # saving holds the interpreter a moment: it gives way to a question first
            if counting.stopped.is_set() or not _save(store, rows, counting.stopped):
                break
            for tokens, path, digest in rows:
                texts.counted(path, digest, tokens)
            saved += len(rows)
    finally:
        counting.end_child()
        child.stdout.close()
        child.wait()
    return saved


def discard_child(child: subprocess.Popen) -> None:
    """End a counting child nobody will read (it ends when its stdin does)."""
    with contextlib.suppress(OSError):
        if child.stdin is not None:
            child.stdin.close()
        if child.stdout is not None:
            child.stdout.close()
    child.wait()
