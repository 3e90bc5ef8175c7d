"""``memstrata index``, ``watch``, ``status`` and ``query``."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
from pathlib import Path

from typing import TYPE_CHECKING

from memstrata.indexer.project import (
    INDEX_FILE,
    MAX_FILE_BYTES_LIMIT,
    ProjectError,
    StoreChoice,
    index_dir,
    resolve_root,
    too_broad,
)
from memstrata.storage import StoreError
from memstrata.storage import code_index as ci

from . import argtypes
# Re-exported: the other commands import these from here.
from .reading import NOT_INDEXED, NotIndexed, fail, first_run_unfinished, open_indexed
from .resident import resident_command

if TYPE_CHECKING:  # imported where used: a query answered by the daemon never loads them
    from memstrata.indexer.run import IndexSummary
    from memstrata.indexer.workspace import Workspace

_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
               "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4, "tb": 1024**4, "tib": 1024**4}


def _size_text(n: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def parse_size(text: str) -> int:
    """``1MiB``, ``512k``, ``2000000`` -> bytes, at most MAX_FILE_BYTES_LIMIT."""
    s = text.strip().lower()
    num = s.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = s[len(num):]
    try:
        value = float(num)
    except ValueError:
        value = math.nan
    if unit not in _SIZE_UNITS or math.isnan(value) or math.isinf(value):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 1MiB, 512k or a byte count)")
    if value * _SIZE_UNITS[unit] < 1:
        raise argparse.ArgumentTypeError(f"too small: {text!r} (a cap of at least 1 byte; try 1MiB)")
    if value * _SIZE_UNITS[unit] > MAX_FILE_BYTES_LIMIT:
        raise argparse.ArgumentTypeError(
            f"over the limit: {text!r} (at most {_size_text(MAX_FILE_BYTES_LIMIT)}; "
            "no source file worth indexing is larger)")
    return max(1, int(value * _SIZE_UNITS[unit]))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="index a project (first run: full index; later: only what changed)",
                       description="Index the project at PATH (default: the current directory) into "
                       "PATH/.memstrata/index.db; a PATH inside a project that has an index updates that "
                       "project's index. Unchanged files are skipped, deleted ones removed.")
    argtypes.add_project(p)
    p.add_argument("--max-file-size", type=parse_size, default=None, metavar="SIZE",
                   help="skip files larger than SIZE, e.g. 2MiB, 512k or a byte count (default 1MiB, at most "
                   f"{_size_text(MAX_FILE_BYTES_LIMIT)}; remembered for the project)")
    p.add_argument("--workers", type=argtypes.positive_int, default=None,
                   help="parse processes for a cold index (default: CPU count)")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("watch", help="index, then keep the index fresh while files change (Ctrl-C stops)",
                       description="Index the project (catching up on changes), then re-index files as they "
                       "change until Ctrl-C or SIGTERM. Ends with exit code 1 if the index is deleted or "
                       "replaced meanwhile (rm -rf .memstrata).")
    argtypes.add_project(p)
    p.add_argument("--debounce", type=argtypes.non_negative, default=0.05, metavar="SECONDS",
                   help="quiet time before a burst of changes is applied (default 0.05)")
    p.add_argument("--workers", type=argtypes.positive_int, default=None,
                   help="parse processes for the first (cold) index (default: CPU count)")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser("status", help="show the index state (the index_status fields)",
                       description="Show the state of the project's index: ready, indexing (a run, or a "
                       "watcher in another process applying file changes), stale (files changed since the last "
                       "run and no watcher runs, or a run was interrupted) or error; files and symbols "
                       "per language, skipped files and the index size. Reads only: a folder that was never "
                       "indexed is reported as such and nothing is created.")
    argtypes.add_project(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    listing = p.add_mutually_exclusive_group()
    listing.add_argument("--skipped", action="store_true",
                   help="list the files left out of the index, one per line with the reason (too_large, "
                        "binary, unsupported_language, ...) and, where it was read, size")
    listing.add_argument("--syntax-errors", action="store_true",
                   help="list every file indexed with syntax errors (indexed as far as it parses), one per line "
                        "with where the parse failed")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("query", help="print the context slice for a question",
                       description="Build the token-budgeted context slice for QUERY. Plain output prints "
                       "the slice and a one-line summary; --json prints exactly context, tokens, "
                       "baseline_tokens and sources. Reads only: index the project first.")
    p.add_argument("query", type=_question,
                   help='natural language or a symbol name, e.g. "AuthService.login and its callers"; '
                   '"-" reads it from standard input (a long question, a pasted stack trace)')
    argtypes.add_project(p)
    p.add_argument("--max-tokens", default="4096", metavar="N", help="token budget of the slice (default 4096)")
    p.add_argument("--include-tests", action="store_true", help="let test code into the slice")
    p.add_argument("--json", action="store_true", help="print the four API fields as JSON")
    p.set_defaults(func=cmd_query)


def _question(text: str) -> str:
    """QUERY as given, or for "-" what standard input holds (read once, as UTF-8)."""
    if text != "-":
        return text
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise argparse.ArgumentTypeError(f"standard input is not UTF-8 text (byte {exc.start})") from None


def open_workspace(path: str | None, store: StoreChoice | None = None, **kw) -> Workspace:
    """The project's workspace, creating its index folder if needed (commands that write).

    Without a PATH the project is the current directory; when that is the
    filesystem root or the home folder itself (where MCP hosts often start the
    servers they launch) and no index is there yet, it is refused rather than
    indexing everything below it.
    """
    if path is None:
        root = resolve_root(None)
        if not (index_dir(root) / INDEX_FILE).is_file() and too_broad(root):
            where = "the filesystem root" if root == Path(root.anchor) else "your home folder"
            raise ProjectError(f"the current directory is {where}, not a project: run this in the project "
                               "folder or name it (--project /path/to/project)")
    from memstrata.indexer.workspace import Workspace

    return Workspace.open(path, store=store, **kw)


def _waiting() -> None:
    print("memstrata: another MemStrata process is writing this index; waiting for it...", file=sys.stderr)


def ensure_indexed(ws: Workspace, quiet: bool = False) -> IndexSummary:
    from .progress import ProgressBar

    bar = None if quiet else ProgressBar()
    try:
        return ws.index(progress=bar, on_wait=None if quiet else _waiting)
    finally:
        if bar is not None:
            bar.close()


def summary_line(s: IndexSummary) -> str:
    skipped = ", ".join(f"{n} {reason}" for reason, n in s.skipped.items()) or "none"
    files = f"{s.files} file" + ("" if s.files == 1 else "s")
    return (f"indexed {files} in {s.seconds:.1f}s: {s.parsed} parsed, {s.unchanged} unchanged, "
            f"{s.removed} removed, {s.files_with_syntax_errors} with syntax errors; skipped: {skipped}")


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the working directory was deleted
        return None


def cmd_index(args) -> int:
    named = argtypes.project_of(args)
    try:
        with open_workspace(named, argtypes.store_of(args),
                            max_file_bytes=args.max_file_size, workers=args.workers) as ws:
            given = named if named is not None else _cwd()
            if not args.json and given is not None and Path(given).expanduser().resolve() != ws.root:
                # A folder inside an indexed project belongs to that project's index, whether it was
                # named or is where the command runs: the run says which project it updated.
                print(f"project: {ws.root} (the indexed project holding {given})", file=sys.stderr, flush=True)
            summary = ensure_indexed(ws, quiet=args.json)
            if args.json:
                out = {k: v for k, v in vars(summary).items() if k not in ("changed_paths", "removed_paths")}
                out["project"] = str(ws.root)
                print(json.dumps(out, indent=2))
            else:
                print(summary_line(summary))
    except (ProjectError, StoreError) as exc:
        return fail(str(exc))
    return 0


def cmd_watch(args) -> int:
    try:
        ws = open_workspace(argtypes.project_of(args), argtypes.store_of(args), workers=args.workers)
    except (ProjectError, StoreError) as exc:
        return fail(str(exc))
    stop = threading.Event()
    catching_up = True

    def on_signal(signum, frame):
        stop.set()
        if catching_up:
            # The first index run stops as on Ctrl-C (its workers ended, the index consistent);
            # waiting for it could take minutes on a large project.
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_signal)
    try:
        try:
            print(summary_line(ensure_indexed(ws)), flush=True)
        except StoreError as exc:
            return fail(str(exc))

        def report(s: IndexSummary) -> None:
            if s.parsed or s.removed:
                parts = [f"{s.parsed} updated"] + ([f"{s.removed} removed"] if s.removed else [])
                print(f"{', '.join(parts)} in {s.seconds * 1000:.0f} ms", flush=True)

        ws.listeners.append(report)
        ws.log_store_gone = False  # said below, in this command's words
        ws.graph  # build it now so updates refresh it incrementally
        ws.start_watching(debounce=args.debounce)
        catching_up = False
        print(f"watching {ws.root} (Ctrl-C to stop)", flush=True)
        while not stop.wait(0.5):
            if ws.index_gone:
                # Nothing this process writes would reach an index anyone reads: say so and end,
                # rather than watch on for nothing.
                if not ws.root.exists():
                    return fail("the project folder was moved or deleted while watching; run memstrata watch "
                                "again in its new place", code=1)
                return fail("the index was deleted or replaced while watching; run memstrata index, "
                            "then memstrata watch again", code=1)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        ws.close()
    print("stopped", flush=True)
    return 0


def cmd_status(args) -> int:
    try:
        with open_indexed(argtypes.project_of(args), argtypes.store_of(args)) as ws:
            if args.skipped:
                return _print_skipped(ci.skipped_files(ws.store), args.json)
            if args.syntax_errors:
                return _print_syntax_errors(ci.syntax_error_files(ws.store, limit=None), args.json)
            st = ws.status()
            broken = ci.syntax_error_files(ws.store) if st.syntax_errors and not args.json else []
            cap = ws.indexer.max_file_bytes
    except NotIndexed as exc:
        return _print_not_indexed(exc.root, args.json)
    except (ProjectError, StoreError) as exc:
        return fail(str(exc))
    if args.json:
        print(json.dumps(st.as_dict(), indent=2))
        return 0
    print(f"project:       {st.project}")
    print(f"status:        {st.status}" + (f" ({st.message})" if st.message else ""))
    print(f"files indexed: {st.files_indexed} ({st.symbols} symbols, {st.syntax_errors} with syntax errors)")
    print(f"last indexed:  {st.last_indexed or ('never' if not st.files_indexed else 'no index run has finished yet')}")
    print(f"index size:    {st.index_size_mb} MB")
    if st.languages:
        print("languages:     " + ", ".join(f"{lang} {n}" for lang, n in st.languages.items()))
    if st.skipped:
        print("skipped:       " + ", ".join(f"{reason} {n}" for reason, n in st.skipped.items()))
    if st.skipped.get("too_large"):
        # The cap is remembered from the last --max-file-size: say which it is and how to move it.
        print(f"size cap:      {_size_text(cap)} per file (memstrata index --max-file-size SIZE changes it)")
    if broken:
        # Indexed as far as they parse; which ones, so they can be fixed or told apart.
        more = st.syntax_errors - len(broken)
        print("syntax errors: " + ", ".join(f"{p} ({err})" if err else p for p, err in broken)
              + (f" and {more} more (memstrata status --syntax-errors lists them all)" if more > 0 else ""))
    return 0


def _print_syntax_errors(rows: list[tuple[str, str | None]], as_json: bool) -> int:
    if as_json:
        print(json.dumps([{"path": p, "error": e} for p, e in rows], indent=2))
        return 0
    for path, error in rows:
        print(f"{path}  {error}" if error else path)
    # As --skipped does: a count on stderr, so an empty list reads as "none", not as no answer.
    print(f"-- {len(rows)} file{'s' if len(rows) != 1 else ''} indexed with syntax errors", file=sys.stderr)
    return 0


def _print_skipped(rows: list[tuple[str, str, int | None]], as_json: bool) -> int:
    if as_json:
        print(json.dumps([{"path": p, "reason": r, "size": n} for p, r, n in rows], indent=2))
        return 0
    for path, reason, size in rows:
        print(f"{path}  {reason}" + (f"  ({size:,} bytes)" if size is not None else ""))
    folders = sum(1 for path, _reason, _size in rows if path.endswith("/"))
    files = len(rows) - folders
    parts = [f"{files} file{'s' if files != 1 else ''}"] if files or not folders else []
    if folders:
        parts.append(f"{folders} folder{'s' if folders != 1 else ''}")
    print(f"-- {' and '.join(parts)} left out", file=sys.stderr)
    return 0


def _print_not_indexed(root: Path, as_json: bool) -> int:
    """A never-indexed project is a state, not an error: say so and create nothing."""
    if as_json:
        print(json.dumps({"project": str(root), "files_indexed": 0, "last_indexed": None, "index_size_mb": 0.0,
                          "status": "stale", "message": NOT_INDEXED}, indent=2))
    else:
        print(f"project:       {root}")
        print(f"status:        {NOT_INDEXED}")
    return 0


def _query(ws: Workspace, args) -> int:
    """The slice for ``args.query``, printed; run in-process or by the project's daemon."""
    from memstrata.compressor import QueryError, context_query

    try:
        if (refusal := first_run_unfinished(ws)) is not None:
            return refusal
        result = context_query(ws, args.query, max_tokens=args.max_tokens, include_tests=args.include_tests)
    except QueryError as exc:
        return fail(str(exc))
    if args.json:
        print(json.dumps(result.api_fields(), indent=2, ensure_ascii=False))
        # stdout is exactly the tool's answer; what MCP sends as a second text item goes to stderr.
        for note in result.notes:
            print(f"note: {note}", file=sys.stderr)
        return 0
    print(result.context)
    # Out before the summary: a reader that went away (`| head -0`) ends the command here, quietly.
    sys.stdout.flush()
    saved = result.baseline_tokens - result.tokens
    note = f"; {'; '.join(result.notes)}" if result.notes else ""
    # A slice of small files can be larger than they are (its file headers and markers).
    saving = f"{saved} saved" if saved >= 0 else f"{-saved} more than the files themselves"
    print(f"-- {result.tokens} tokens (budget {result.max_tokens}), baseline {result.baseline_tokens}, "
          f"{saving}; sources: {', '.join(result.sources) or 'none'}{note}", file=sys.stderr)
    return 0


cmd_query = resident_command("query", _query)
