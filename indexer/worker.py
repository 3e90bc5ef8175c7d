"""The per-file work of an index run: read, decode, parse, prepare search text.

Runs in worker processes during a cold index, so it takes and returns plain
picklable data and touches no database.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

from memstrata.storage.code_index import FileRecord
from memstrata.storage.text import expand_name

from .imports import ResolveContext, resolve_import
from .languages import language_of
from .model import ParseResult
from .parse import ParseTimeout, parse_rows
from .scan import PARSE_TIMEOUT, UNREADABLE, VANISHED, SkipFile, decode_source, is_test_path

# A function's whole text is searchable: the words a question shares with a
# long function are as often in its middle or end as in its first lines (it
# was cut at 1,200 characters, which hid most of every large function, the
# very bodies whose selection depends most on the search's evidence).  The
# cap only bounds a pathological generated function.
_FTS_BODY_CHARS = 60_000
# A class's methods are indexed on their own; its row only needs the header
# and the attributes declared at the top.
_FTS_CONTAINER_CHARS = 400
_CONTAINERS = frozenset({"class", "struct", "interface", "enum", "module"})


@dataclass(slots=True)
class Parsed:
    """A parsed file as storage rows (see ``storage.code_index.write_file``).

    ``imports`` rows end with the resolved target, or are 4-tuples still to
    be resolved when no resolve context was available in the worker.
    """

    record: FileRecord
    text: str
    symbols: list[tuple]
    refs: list[tuple]
    imports: list[tuple]
    fts_rows: list[tuple[str, str, str, str]]
    resolved: bool


# Set once per worker process (pool initializer) so imports are resolved in
# parallel rather than in the process that writes the store.
_resolve_ctx: ResolveContext | None = None

_PARENT_POLL_SECONDS = 0.25


def set_resolve_context(ctx: ResolveContext | None) -> None:
    global _resolve_ctx
    _resolve_ctx = ctx


def init_worker(ctx: ResolveContext | None, owner_pid: int) -> None:
    """Pool initializer: the resolve context, and a worker that dies with the index run.

    A parse worker blocks reading its task pipe; if the index run is killed
    (``kill -9``) nobody will ever write to it, so the worker must notice on
    its own that the run (``owner_pid``) is gone and exit.
    """
    set_resolve_context(ctx)
    _die_with(owner_pid)
    # Everything alive now (modules, the resolve context, a forked parent's
    # heap) lives as long as the worker: keep the cyclic collector from
    # re-scanning it, and let a file's short-lived match objects (acyclic,
    # freed by reference counting) die before a young collection looks at them.
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    gc.enable()  # a forked worker inherits the run's paused collector (indexer/run.py)


def _die_with(owner_pid: int) -> None:
    parent = os.getppid()  # the run itself (fork) or its fork server
    _set_parent_death_signal()

    def gone() -> bool:
        if os.getppid() != parent:  # re-parented: the parent died
            return True
        try:
            os.kill(owner_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False

    def watch() -> None:
        while not gone():
            time.sleep(_PARENT_POLL_SECONDS)
        os._exit(1)

    if gone():  # died before the death signal was armed
        os._exit(1)
    threading.Thread(target=watch, name="memstrata-parent-watch", daemon=True).start()


def _set_parent_death_signal() -> None:
    """Linux: have the kernel SIGKILL this process when its parent dies (immediate)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # the polling thread still covers it


_PR_SET_PDEATHSIG = 1


@dataclass(slots=True)
class Skipped:
    path: str
    reason: str
    size: int | None


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read_bytes(abs_path: str, path: str, cap: int) -> bytes | Skipped:
    try:
        with open(abs_path, "rb") as fh:
            data = fh.read(cap + 1)
    except FileNotFoundError:
        return Skipped(path, VANISHED, None)
    except OSError:
        return Skipped(path, UNREADABLE, None)
    if len(data) > cap:
        return Skipped(path, "too_large", None)
    return data


def process_file(root: str, path: str, language: str, cap: int) -> Parsed | Skipped:
    abs_path = os.path.join(root, path)
    try:
        st = os.stat(abs_path)
    except FileNotFoundError:
        return Skipped(path, VANISHED, None)
    except OSError:
        return Skipped(path, UNREADABLE, None)
    data = read_bytes(abs_path, path, cap)
    if isinstance(data, Skipped):
        return data
    return parse_bytes(path, language, data, st.st_mtime_ns)


def parse_bytes(path: str, language: str, data: bytes, mtime_ns: int) -> Parsed | Skipped:
    try:
        text, encoding = decode_source(data)
    except SkipFile as skip:
        return Skipped(path, skip.reason, len(data))
    source = data if encoding == "utf-8" else text.encode("utf-8")
    language = language_of(path, language, source)
    try:
        result, refs = parse_rows(path, language, source)
    except ParseTimeout:
        return Skipped(path, PARSE_TIMEOUT, len(data))
    record = FileRecord(
        path=path,
        language=language,
        size=len(data),
        mtime_ns=mtime_ns,
        hash=content_hash(data),
        status="syntax_error" if result.syntax_error else "ok",
        error=result.syntax_error,
        encoding=encoding,
        lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1),
        is_test=is_test_path(path),
        indexed_at=time.time(),
    )
    return to_rows(record, text, result, refs, source, _resolve_ctx)


def to_rows(record: FileRecord, text: str, result: ParseResult, refs: list[tuple], source: bytes,
            ctx: ResolveContext | None) -> Parsed:
    symbols = [
        (s.name, s.qualname, s.kind, s.parent, s.start_byte, s.end_byte, s.start_line, s.end_line,
         s.signature, s.docstring)
        for s in result.symbols
    ]
    if ctx is not None:
        imports = [(i.module, i.name, i.alias, i.line, resolve_import(result.language, i, result.path, ctx))
                   for i in result.imports]
    else:
        imports = [(i.module, i.name, i.alias, i.line) for i in result.imports]
    return Parsed(record, text, symbols, refs, imports, fts_rows(result, source), ctx is not None)


def fts_rows(result: ParseResult, source: bytes) -> list[tuple[str, str, str, str]]:
    rows = []
    for s in result.symbols:
        cap = _FTS_CONTAINER_CHARS if s.kind in _CONTAINERS else _FTS_BODY_CHARS
        body = source[s.start_byte : min(s.end_byte, s.start_byte + cap)].decode("utf-8", "ignore")
        rows.append(
            (
                expand_name(s.qualname),
                s.signature,
                s.docstring or "",
                body,
            )
        )
    return rows


def process_batch(args: tuple[str, list[tuple[str, str]], int]) -> list[Parsed | Skipped]:
    root, items, cap = args
    return [process_file(root, path, language, cap) for path, language in items]
