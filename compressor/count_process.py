"""Whole-file token counts made in a child process, for a server's first minutes on a fresh index.

A server started right after ``memstrata index`` finds no file counted (the
index run leaves counting out: see file_counts.py), and counting a large
project is seconds of work (sympy, 26 MB of text: 2.6 s of one core).  On a
thread of the server it shares the interpreter lock with the questions being
answered: the encoding lets go of it, but the Python around it (reading the
texts, splitting long files into steps, giving way to every question) does
not, so it crawled along in the moments no question was answered (8-11 s on
sympy with questions back to back), and every file a question drew on before
it was reached was counted on that question's path (the first 40-70 questions
of a fresh server: 3.4-3.9 MB, 0.5-2 s of encoding, on the first session's
slowest answers).  A child process counts on the other core without ever holding
the server's interpreter.  It gives way to questions as the thread did: the
server writes ``p`` on its stdin when it starts answering one and ``r`` when
none is left, and the child stops between steps of a few milliseconds
(``step_chars`` characters of encoding) meanwhile, so that a question has
both cores to itself (it counts the files it draws on that are not counted
yet on two threads).  Before the first question it counts undisturbed:
``memstrata mcp`` starts it before it imports the SDK, about a second before
it can answer the client's ``initialize``.

The child only reads: it opens the index read-only (never creating a file,
so an index deleted meanwhile makes it stop instead of leaving a new one
behind) and writes its counts on its stdout, a JSON line of ``[tokens, path,
content hash]`` rows per batch of files read.  The server saves them (a file
rewritten since has another hash and is left alone) and tells its kept texts,
as its own counting thread does.  Killed at any moment, the child leaves nothing: what it
counted and the server saved is right, the rest is counted later.  It ends
when the server closes its stdin or is gone (its stdin reaches end of file,
or it is handed to another parent), so it never outlives the server.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

BATCH = 32  # files read from the index together
BATCH_BYTES = 1_000_000  # ... at most about this much text
PARENT_CHECK_S = 1.0  # how often the child looks whether its server is still there
HOLD, GO = b"p", b"r"  # what the server writes on the child's stdin: a question is answered / none is


def spawn(store_path: Path, step_chars: int) -> subprocess.Popen:
    """The child counting the files of the SQLite index at ``store_path``, in steps of about
    ``step_chars`` characters; its stdout carries the counts, its stdin :data:`HOLD` and :data:`GO`."""
    return subprocess.Popen(
        # -P: the child starts in the server's folder, often the project, whose modules must never
        # stand in for the standard library's (the same rule as the CLI's own child processes).
        [sys.executable, "-P", "-m", "memstrata.compressor.count_process", str(store_path), str(step_chars),
         str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, close_fds=True)


def needed(store_path: Path) -> bool:
    """Whether the index at ``store_path`` has files whose tokens are not counted yet (a look of a
    millisecond, where starting a child to find out costs half a second of a core)."""
    from memstrata.storage import Store
    from memstrata.storage import code_index as ci

    try:
        store = Store(store_path, readonly=True)
    except Exception:
        return False
    try:
        return ci.any_uncounted(store)
    except Exception:
        return False
    finally:
        store.close()


def _follow_parent(parent: int, go: threading.Event) -> None:
    """Hold and go as the server says; end this process when the server closes our stdin or dies
    (the pipe reaches its end, or this process is handed to another parent: a process the server
    forked may hold the pipe open)."""
    fd = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], PARENT_CHECK_S)
        data = os.read(fd, 4096) if ready else None
        if data == b"" or os.getppid() != parent:
            os._exit(0)
        if data and data[-1:] == HOLD:  # of several words read at once, the last one holds
            go.clear()
        elif data:
            go.set()


def batches(todo: list[tuple[str, int]], most_files: int = BATCH, most_bytes: int = BATCH_BYTES) -> list[list[str]]:
    """The paths of ``todo`` ((path, size) rows) in order, a batch at most ``most_files`` files or
    about ``most_bytes`` bytes: the reads of this child and of a server's own counting thread."""
    out: list[list[str]] = []
    size = 0
    for path, n in todo:
        if not out or len(out[-1]) >= most_files or size + n > most_bytes:
            out.append([])
            size = 0
        out[-1].append(path)
        size += n
    return out


def main(argv: list[str]) -> int:
    go = threading.Event()
    go.set()
    # The parent named on the command line, not the one found now: a server killed while this
    # child started up has already handed it to another.
    parent = int(argv[2]) if len(argv) > 2 else os.getppid()
    threading.Thread(target=_follow_parent, args=(parent, go), daemon=True).start()
    from memstrata.storage import Store
    from memstrata.storage import code_index as ci

    from .tokens import count_tokens, exact_parts

    step_chars = max(1000, int(argv[1]))

    def count(text: str) -> int:
        n = 0
        for part in exact_parts(text, step_chars) if len(text) > step_chars else [text]:
            go.wait()
            n += count_tokens(part)
        return n

    try:
        store = Store(Path(argv[0]), readonly=True)
    except Exception:
        return 1  # gone or unreadable: the server counts what it needs itself
    out = sys.stdout
    try:
        for batch in batches(ci.uncounted_files(store)):
            go.wait()
            found = ci.file_texts_counted(store, batch)
            rows = [[count(found[p][0]), p, found[p][1]] for p in batch if p in found and found[p][2] is None]
            if rows:
                out.write(json.dumps(rows) + "\n")
                out.flush()
    except Exception:  # the index changed shape under it, or the server stopped reading: it counts the rest
        return 1
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
