"""``memstrata mcp``: MemStrata's MCP tools over stdio, for clients that launch it.

stdout carries the protocol and nothing else: logging goes to stderr (set up
by the CLI before the SDK is imported), the index progress too, and Python's
``sys.stdout`` is made unbuffered so that a stray ``print`` while serving lands
on the stdio front's stderr diversion (:func:`mcp_server.serve_stdio`) at once
instead of reaching the wire at exit.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys

from memstrata.indexer.project import ProjectError
from memstrata.storage import StoreError, StoreReadOnly

from . import argtypes
from .progress import ProgressBar

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp", help="serve the MCP tools (context_query, index_status, savings_summary, find_symbol, "
        "find_references, file_outline) over stdio",
        description="Run MemStrata as an MCP server on stdin/stdout, for MCP clients that launch it "
        "(e.g. `claude mcp add memstrata -- memstrata mcp`). Opens the project's index (building it "
        "on first use), catches up with changes since the last run and keeps it fresh while it runs. "
        "Works side by side with a `memstrata serve` on the same project.")
    argtypes.add_project(p)
    p.add_argument("--no-watch", action="store_true",
                   help="do not follow file changes while serving (index_status then checks the disk)")
    # SUPPRESS keeps `memstrata -v mcp` working: a subparser default would overwrite it.
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="log detail to stderr")
    p.set_defaults(func=cmd_mcp)


def _unbuffered_stdout() -> None:
    if sys.stdout is not None and sys.stdout.fileno() == 1:
        sys.stdout.flush()
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)


def _counting_child(args: argparse.Namespace):
    """The child process counting the whole-file tokens of the project's own index, started before
    the server imports the SDK (a second): on an index fresh from `memstrata index`, it is then
    counting by the time the client asks its first questions (see compressor/count_process.py).
    None for a shared store, no index yet, or no process to be had."""
    from memstrata.compressor import count_process, file_counts
    from memstrata.indexer.project import INDEX_FILE, index_dir, resolve_root

    try:
        if argtypes.store_of(args).shared:
            return None
        path = index_dir(resolve_root(argtypes.project_of(args))) / INDEX_FILE
        if not path.is_file() or not os.access(path, os.W_OK) or not count_process.needed(path):
            return None  # indexed by the server itself, read-only (nothing to save counts in), or counted
        return count_process.spawn(path, file_counts.CHILD_STEP_CHARS)
    except (OSError, StoreError, ProjectError):
        return None


def cmd_mcp(args: argparse.Namespace) -> int:
    from memstrata.indexer.project import resolve_root

    try:
        # A project folder that is not there is said at once: not after the SDK's imports, which
        # take seconds on a busy machine, with a client waiting for a server that never starts.
        resolve_root(argtypes.project_of(args))
    except ProjectError as exc:
        print(f"memstrata: {exc}", file=sys.stderr)
        return 2
    pending = [_counting_child(args)]  # handed to the server once its index is open
    try:
        return _serve(args, pending)
    finally:
        if pending[0] is not None:  # the server never got as far (no index it could open)
            from memstrata.compressor.file_counts import discard_child

            discard_child(pending[0])


def _serve(args: argparse.Namespace, pending: list) -> int:
    # Imported here so that other commands do not pay for the SDK.
    from memstrata.mcp_server import IndexWarmup, build_server
    from memstrata.mcp_server.stdio import StopSignals, run_stdio_server

    _unbuffered_stdout()
    # Clients stop servers with SIGTERM: it unwinds like Ctrl-C, from here on, so the
    # watcher stops and the store closes cleanly.
    stops = StopSignals().install()
    from . import report_error  # (here: the package imports this module)
    from .index import NotIndexed, open_indexed, open_workspace

    try:
        store = argtypes.store_of(args)
        if store.shared:
            # A shared index is written by its checkout's index or watch; here it is only read.
            ws = open_indexed(argtypes.project_of(args), store)
        else:
            ws = open_workspace(argtypes.project_of(args))
    except StoreReadOnly:
        # An index nobody may update still answers: serve it as it is.
        try:
            ws = open_indexed(argtypes.project_of(args))
        except (ProjectError, StoreError, NotIndexed) as exc:
            print(f"memstrata: {exc}", file=sys.stderr)
            return 2
        print("memstrata: the index is read-only: serving it as it is (changes to the project are "
              "not indexed until it and its folder are writable)", file=sys.stderr)
    except StoreError as exc:
        # An index this MemStrata cannot open (a newer one's, a damaged file): the client is told
        # on every call, instead of seeing its connection close before it could read why.
        print(f"memstrata: {exc}", file=sys.stderr)
        server = build_server(None, unavailable=f"MemStrata cannot open the index of this project: {exc}")
        code = run_stdio_server(server, lambda: None, stops, report=report_error)
        return code or 2  # it served no index: a script sees the failure, as with every other command
    except (ProjectError, NotIndexed) as exc:
        print(f"memstrata: {exc}", file=sys.stderr)
        return 2

    first_build = ws.files_indexed() == 0
    warmup = IndexWarmup(ws, watch=not args.no_watch and not ws.store.readonly,
                         progress=ProgressBar("memstrata: indexing") if first_build else None)
    child, pending[0] = pending[0], None
    if child is not None:
        warmup.count_files(child)
    # The session figures are those of the serve processes running on this project now.
    from memstrata.harness.proxy.savings import savings_summary  # here: `memstrata query` and the rest never need it

    server = build_server(ws, savings=lambda: savings_summary(ws), warmup=warmup)
    log.info("serving MCP over stdio for %s", ws.root)

    def cleanup() -> None:
        warmup.cancel()  # a first index still running stops at its next batch, its workers ended
        ws.stop_watching()
        # A catch-up still running owns the store; the process exit ends it
        # (SQLite rolls back the open transaction), so only close when done.
        if warmup.join(timeout=5):
            ws.close()

    return run_stdio_server(server, cleanup, stops, report=report_error)

