"""The ``memstrata`` command line.

Each command lives in a module exposing ``register(subparsers)``, which adds
its parser and sets ``func=handler`` (``handler(args) -> int`` exit code).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys

from memstrata import __version__
from memstrata.indexer.project import REBUILD_HINT
from memstrata.storage import StoreCorrupt, StoreError
from memstrata.storage.json_types import ECHO_CHARS, echoed

from memstrata.console import inert_on_terminal, quiet_on_broken_pipe

COMMAND_MODULES = [
    "memstrata.harness.cli.index",
    "memstrata.harness.cli.mcp",
    "memstrata.harness.cli.serve",
    "memstrata.harness.cli.config",
    "memstrata.harness.cli.savings",
    "memstrata.harness.cli.navigate",
    "memstrata.harness.cli.daemon",
]


# The module defining each command the resident query process answers
# (harness/cli/resident.py), and the index commands: a call of one of them
# builds only that module's parser, so a one-shot query does not import every
# other command (the proxy, the MCP server) before asking the daemon, and an
# index run does not pay for them before its first parse.  A command missing
# here still works, with the full parser.
LEAN_COMMANDS = {"query": "memstrata.harness.cli.index", "index": "memstrata.harness.cli.index",
                 "watch": "memstrata.harness.cli.index", "status": "memstrata.harness.cli.index",
                 "daemon": "memstrata.harness.cli.daemon",
                 "symbol": "memstrata.harness.cli.navigate", "refs": "memstrata.harness.cli.navigate",
                 "outline": "memstrata.harness.cli.navigate"}


class _Parser(argparse.ArgumentParser):
    """argparse's parser (its subcommands' too), whose errors repeat at most ECHO_CHARS of an
    argument: argparse quotes a refused value in full (an invalid choice, an integer that is not
    one, unrecognized arguments), and an argument can be any length."""

    argv: list[str] = []  # the command line being parsed (set by parse)

    def error(self, message: str):  # type: ignore[override]
        for arg in sorted(set(self.argv), key=len, reverse=True):
            if len(arg) > ECHO_CHARS:
                message = message.replace(repr(arg), echoed(arg, quoted=True)).replace(arg, echoed(arg))
        super().error(message)


def build_parser(modules: list[str] | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memstrata",
        description="Local context engine for coding agents: indexes a project into a "
        "dependency graph and serves token-budgeted context slices.",
    )
    parser.add_argument("--version", action="version", version=f"memstrata {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES if modules is None else modules:
        importlib.import_module(name).register(sub)
    return parser


def _modules_for(argv: list[str]) -> list[str] | None:
    """Only the module of a lean command named by ``argv``; None: all of them."""
    i = 0
    while i < len(argv) and argv[i] in ("-v", "--verbose"):
        i += 1
    module = LEAN_COMMANDS.get(argv[i]) if i < len(argv) else None
    return [module] if module else None


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, letting the project folder come after options too (``query TEXT --json PATH``):
    argparse fills an optional positional in the same stretch as the one before it."""
    _Parser.argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(argv)
    if len(extra) == 1 and not extra[0].startswith("-") and getattr(args, "path", "") is None:
        args.path = extra[0]
    elif extra:
        words = [w for w in extra if not w.startswith("-")]
        if isinstance(getattr(args, "query", None), str) and words and getattr(args, "path", None):
            # ``memstrata query how does it work``: the shell split a question argparse takes word by word.
            question = " ".join([args.query, args.path, *words])
            parser.error(f"unrecognized arguments: {' '.join(extra)} (a question of several words goes in "
                         f"quotes: memstrata query \"{question}\")")
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


@quiet_on_broken_pipe
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The interpreters this process starts (the index's parse workers' fork server and resource
    # tracker, the resident query process) start in the project folder: its files must never
    # stand in for the standard library's modules (a project's own `struct.py` or `logging.py`
    # would run, and the index fail).  Set here, before any thread starts.
    os.environ.setdefault("PYTHONSAFEPATH", "1")
    parser = build_parser(_modules_for(argv))
    if all(a in ("-v", "--verbose") for a in argv):
        # `memstrata` alone (a first try): the commands, not just "COMMAND is required".
        parser.print_help(sys.stderr)
        return 2
    args = parse(parser, argv)
    sys.stdout, sys.stderr = inert_on_terminal(sys.stdout), inert_on_terminal(sys.stderr)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="memstrata: %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        code = report_error(exc)
        if code is None:
            raise
        return code


def report_error(exc: BaseException) -> int | None:
    """Say what a command's failure means, in one line on stderr, and the exit code; None for a
    failure this cannot put in words (the caller lets it propagate)."""
    if isinstance(exc, StoreCorrupt):  # found damaged while in use (it opened fine)
        print(f"memstrata: the index is unreadable ({exc.__cause__ or exc}); {REBUILD_HINT}", file=sys.stderr)
        return 2
    if isinstance(exc, StoreError):  # a command that did not say it itself (full disk, read-only index)
        print(f"memstrata: {exc}", file=sys.stderr)
        return 2
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT):
        print(f"memstrata: {exc.strerror}: nothing more could be written", file=sys.stderr)
        return 2
    return None


if __name__ == "__main__":
    sys.exit(main())
