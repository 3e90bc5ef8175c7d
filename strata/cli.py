"""The ``strata`` command line.

Targeting follows Strata's CLI: a database path as the first argument or
``--db PATH``, else ``STRATA_DB``, else ``--cache`` for an in-memory
database.  The one command is ``mcp serve`` (stdio MCP server).  Usage
errors go to stderr as ``error: [code]: message`` plus a hint, exit 2; a
database that cannot be opened exits 1.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from memstrata import __version__

from memstrata.console import inert_on_terminal, quiet_on_broken_pipe

USAGE = """\
usage: strata [PATH | --db PATH | --cache] [--branch NAME] mcp serve

Serve a Strata database over MCP (newline-delimited JSON-RPC on stdin/stdout,
logs on stderr), with MemStrata's store underneath.

  PATH, --db PATH   a durable database folder (created when missing)
  --cache           an in-memory database, gone when the server exits
  --branch NAME     the session branch tools use when they name none (default: default)
  -h, --help        show this help
  --version         show the version

Without PATH, --db or --cache the folder comes from STRATA_DB.

  strata ./my-db mcp serve
  STRATA_DB=./my-db strata mcp serve
  strata --cache mcp serve
"""

NO_DATABASE_HINT = "pass a path (strata ./mydb kv put …), set STRATA_DB, or use --cache for ephemeral"


class UsageError(Exception):
    def __init__(self, code: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint


def _fail(code: str, message: str, hint: str | None, status: int) -> int:
    text = f"error: [{code}]: {message}"
    if hint:
        text += f"\n  hint: {hint}"
    print(text, file=sys.stderr)
    return status


def parse(argv: list[str]) -> dict:
    opts: dict = {"db": None, "cache": False, "branch": None, "words": []}
    it = iter(argv)
    for arg in it:
        if arg in ("-h", "--help"):
            opts["help"] = True
        elif arg == "--version":
            opts["version"] = True
        elif arg == "--cache":
            opts["cache"] = True
        elif arg in ("--db", "--branch") or arg.startswith(("--db=", "--branch=")):
            name, eq, value = arg.partition("=")
            if not eq:  # `--db PATH`; `--db=` is an (empty) value of its own
                value = next(it, None)
                if value is None:
                    raise UsageError("invalid_argument.cli.usage", f"{name} needs a value")
            if opts[name[2:]] is not None:
                what = "the database path" if name == "--db" else "--branch"
                raise UsageError("invalid_argument.cli.usage", f"pass {what} once")
            if name == "--branch" and not value:
                raise UsageError("invalid_argument.cli.usage", "the branch name is empty",
                                 "omit --branch to use the default branch")
            opts[name[2:]] = value
        elif arg.startswith("-") and arg != "-":
            raise UsageError("invalid_argument.cli.usage", f"unknown option {arg}", "run strata --help")
        else:
            opts["words"].append(arg)
    return opts


def _command_hint(words: list[str]) -> str:
    """Where the engine's command-line commands went: this server runs them over MCP only (the
    no-database hint the engine prints suggests `strata ./mydb kv put ...`)."""
    from .tools import WIRE

    tool = "strata_" + "_".join(words[:2])
    if tool in WIRE:
        return f"start `strata PATH mcp serve` and call the {tool} tool (strata_command runs any engine command)"
    return "run strata --help"


def target(opts: dict) -> tuple[str | None, bool]:
    """(durable folder, or None for --cache; whether it is the cache)."""
    words = opts["words"]
    path = opts["db"]
    if words and words[0] != "mcp":
        if path is not None:
            raise UsageError("invalid_argument.cli.usage", "pass the database path once (a PATH or --db)")
        path = words.pop(0)
    if words != ["mcp", "serve"]:
        command = " ".join(words) or "(none)"
        raise UsageError("invalid_argument.cli.usage", f"unsupported command {command}; the command is `mcp serve`",
                         _command_hint(words))
    if opts["cache"]:
        if path is not None:
            raise UsageError("invalid_argument.cli.conflicting_targets",
                             "--cache and a database path cannot be used together",
                             "pass either a path (or --db) or --cache")
        return None, True
    if path is None:
        path = os.environ.get("STRATA_DB") or None
    if path is None:
        raise UsageError("invalid_argument.cli.no_database", "no database specified", NO_DATABASE_HINT)
    if not path.strip():
        raise UsageError("invalid_argument.cli.usage", "the database path is empty", NO_DATABASE_HINT)
    return path, False


@quiet_on_broken_pipe
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # What reaches a terminal on stderr (refusals naming an argument, a branch, the database)
    # shows control characters escaped; stdout is the MCP channel and stays as it is.
    sys.stderr = inert_on_terminal(sys.stderr)
    try:
        opts = parse(argv)
        if opts.get("help"):
            print(USAGE, end="")
            return 0
        if opts.get("version"):
            print(f"strata (memstrata) {__version__}")
            return 0
        path, cache = target(opts)
    except UsageError as exc:
        return _fail(exc.code, exc.message, exc.hint, 2)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="strata: %(message)s")
    return serve(path, cache, opts["branch"])


def serve(path: str | None, cache: bool, branch: str | None) -> int:
    from .mcp import serve as serve_stdio
    from .engine import Engine
    from .store import DB_FILE, DEFAULT_BRANCH, StrataStore, StrataStoreError

    session = branch or DEFAULT_BRANCH
    if not cache and session != DEFAULT_BRANCH and not (Path(path) / DB_FILE).exists():
        # A new database holds only the default branch: refuse before creating anything.
        return _branch_missing(session)
    try:
        store = StrataStore.memory() if cache else StrataStore.open(Path(path))
    except StrataStoreError as exc:
        return _fail("failed_precondition.cli.open", str(exc), None, 1)
    try:
        if store.branch(session) is None:
            return _branch_missing(session)
        logging.getLogger("memstrata.strata").info(
            "serving %s over stdio", "an in-memory database" if cache else f"database {Path(path).name}")
        return serve_stdio(Engine(store, session_branch=session))
    except KeyboardInterrupt:
        return 130
    finally:
        store.close()


def _branch_missing(name: str) -> int:
    return _fail("not_found.cli.branch", f"branch `{name}` does not exist",
                 "list branches with strata_branch_list, or omit --branch", 2)


if __name__ == "__main__":
    raise SystemExit(main())
