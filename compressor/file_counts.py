"""Whole-file token counts, worked out in the background once the index is ready.

Every slice reports ``baseline_tokens``, the tokens of the complete files it
draws on; a file nobody has counted yet costs its query a full encoding of
the file (milliseconds for a large module), which is most of what makes a
new question slow on a long-running server.  The index keeps a count once
made (``files.tokens``), so a server counts the rest while it idles, once
per content: later processes find them saved.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from memstrata.indexer.workspace import Workspace
from memstrata.storage import StoreBusy, StoreError
from memstrata.storage import code_index as ci

from .slice import file_tokens

log = logging.getLogger(__name__)

BATCH = 32  # files counted and saved together
BUSY_PAUSE_S = 0.5  # another process is writing: try again after this


def count_missing(ws: Workspace, stop: threading.Event | None = None,
                  pause: Callable[[], None] | None = None) -> int:
    """Count and save every indexed file's whole-text tokens that the index
    lacks; returns how many were saved.  Stops early on ``stop``, and for
    good when the store cannot be written (read-only, a reader's role).
    ``pause`` is called before each file (a server's: wait while a question
    is answered)."""
    store = ws.store
    try:
        if not store.may_update("files"):
            return 0
    except StoreError as exc:
        log.debug("file token counts: %s", exc)
        return 0
    saved, after = 0, ""
    while stop is None or not stop.is_set():
        if pause is not None:
            pause()
        try:
            todo = ci.uncounted_texts(store, BATCH, after)
        except StoreError as exc:
            log.debug("file token counts: %s", exc)
            return saved
        if not todo:
            return saved
        rows = []
        for path, digest, text in todo:
            if stop is not None and stop.is_set():
                break
            if pause is not None and rows:
                # Each file gives way on its own: a batch of large files is a
                # tenth of a second or more of a core that requests would wait for.
                pause()
            rows.append((file_tokens(path, text), path, digest))
        while True:
            try:
                with store.write(wait=False) as conn:
                    ci.set_file_tokens(conn, rows)
                break
            except StoreBusy:
                if stop is not None and stop.wait(BUSY_PAUSE_S):
                    return saved
                if stop is None:
                    time.sleep(BUSY_PAUSE_S)
            except StoreError as exc:  # read-only for this role, a full disk: counting can wait
                log.debug("file token counts not saved: %s", exc)
                return saved
        saved += len(rows)
        after = todo[-1][0]
    return saved


def start_counting(ws: Workspace, pause: Callable[[], None] | None = None) -> threading.Thread | None:
    """:func:`count_missing` on a daemon thread, giving way to questions
    through ``pause`` (the encoding releases the interpreter lock, the
    Python around it does not)."""
    if ws.store.readonly:
        return None

    def run() -> None:
        try:
            n = count_missing(ws, pause=pause)
            if n:
                log.info("saved the token counts of %d files", n)
        except Exception:  # the workspace closed under it, a damaged row: queries count what they need
            log.debug("background file token counts stopped", exc_info=True)

    thread = threading.Thread(target=run, name="memstrata-file-counts", daemon=True)
    thread.start()
    return thread
