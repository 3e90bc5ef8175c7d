"""``sbuf``: the Stormbuffer-compatible memory command line.

``sbuf [--project | --global] COMMAND ...``.  Human output goes to stdout;
errors print ``error: <message>`` on stderr and exit 1 (usage errors exit 2).
``sbuf invoke`` is the exception: it always answers with one envelope line on
stdout and leaves stderr empty.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from memstrata import __version__

from memstrata.console import quiet_on_broken_pipe
from . import errors
from .errors import SbufError

DESCRIPTION = """\
Agent memory kept as canonical Markdown records (records/<id>.md with TOML
front matter), recalled within a word budget.  Agent writes (MCP, invoke)
only create candidates; a person approves them with `sbuf approve`.

Stores: the global store ($XDG_DATA_HOME/stormbuffer, the default) or, with
--project, the nearest .sbuf/ folder from the working directory."""

EPILOG = """\
commands:
  init [--shared]            create the store (idempotent); --shared commits records to git
  root                       print the store folder (without creating it)
  status [--json]            scope, folder, initialized, visibility, record count
  list [--all]               id, status, kind, scope, title (active only unless --all)
  show ID                    print a record's canonical Markdown
  add / propose              write a record / a candidate in $VISUAL or $EDITOR
  edit ID                    edit an active record in the editor
  supersede ID               write an active replacement of a record in the editor
  approve ID / reject ID     activate / archive a candidate (approve supersedes what it replaces)
  archive ID / restore ID    archive an active record / make an archived one active again
  search QUERY               lexical search (--limit, --all, --json)
  context QUERY              the context result as JSON (--budget, --limit, --all)
  forget ID --destroy        delete a record's file for good (asks first; --yes does not)
  sync / reindex             catch the index up with the Markdown / rebuild it from scratch
  watch [--once]             keep the index caught up while files change (--interval-ms 500)
  gc [--dry-run]             remove the index and leftover temp files (rebuilt on the next read)
  doctor                     check the store, its records and its index
  invoke OPERATION           the version-1 JSON protocol on stdin/stdout
  mcp --stdio                run the MCP adapter (stormbuffer-mcp) on this store

Details: docs/stormbuffer.md."""


EDITOR_NOTE = ("Opens $VISUAL (else $EDITOR) on a private copy; nothing is saved unless the editor exits 0 "
               "and the result is a valid record.  No lock is held meanwhile.  When the save is refused "
               "(edit and supersede: the record changed while it was open), the edited copy is kept and "
               "its file named on stderr.")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        print(f"error: {message}\n\n{self.format_usage()}", file=sys.stderr, end="")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sbuf", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-V", "--version", action="version", version=f"sbuf {__version__}")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--project", dest="mode", action="store_const", const="project",
                       help="use the nearest .sbuf/ store from the working directory")
    where.add_argument("--global", dest="mode", action="store_const", const="global",
                       help="use the global store (the default)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="accepted for compatibility; output is never coloured")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("init", help="create the store")
    p.add_argument("--shared", action="store_true", help="let git track store.toml and the records")
    sub.add_parser("root", help="print the store folder")
    p = sub.add_parser("status", help="describe the store")
    p.add_argument("--json", action="store_true", help="one JSON object: scope, root, initialized, visibility, record_count")
    p = sub.add_parser("list", help="list records")
    p.add_argument("--all", action="store_true", help="every status, not only active records")
    for name, text in (("show", "print a record's Markdown"), ("approve", "activate a candidate"),
                       ("reject", "archive a candidate"), ("archive", "archive an active record"),
                       ("restore", "make an archived record active again")):
        sub.add_parser(name, help=text).add_argument("id")
    p = sub.add_parser("edit", help="edit an active record in the editor", description=EDITOR_NOTE)
    p.add_argument("id")
    for name, text in (("add", "write a human record in the editor"),
                       ("propose", "write a candidate in the editor")):
        _draft_args(sub.add_parser(name, help=text, description=EDITOR_NOTE))
    p = sub.add_parser("supersede", help="write an active replacement in the editor", description=EDITOR_NOTE)
    p.add_argument("id")
    _draft_args(p)
    p = sub.add_parser("search", help="lexical search")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=20, help="most results (default 20; clamped to 1-100)")
    p.add_argument("--all", action="store_true", help="every status, not only active records")
    p.add_argument("--json", action="store_true", help="the results as one JSON array")
    p = sub.add_parser("context", help="the context result for a question, as JSON")
    p.add_argument("query")
    p.add_argument("--budget", type=int, default=512, help="word budget (default 512; clamped to 1-4096)")
    p.add_argument("--limit", type=int, default=20, help="most search results to fill it from (default 20; clamped to 1-100)")
    p.add_argument("--all", action="store_true", help="every status, not only active records")
    p = sub.add_parser("forget", help="permanently delete a record's file (needs --destroy)")
    p.add_argument("id")
    p.add_argument("--destroy", action="store_true", help="acknowledge that the file is deleted for good")
    p.add_argument("--yes", action="store_true", help="skip the confirmation (needed without a terminal)")
    sub.add_parser("sync", help="catch the index up with the Markdown")
    p = sub.add_parser("watch", help="keep the index caught up while record files change")
    p.add_argument("--once", action="store_true", help="run one cycle and exit")
    p.add_argument("--interval-ms", type=_milliseconds, default=500, metavar="MS",
                   help="time between cycles (default 500; a shorter one is taken as 50)")
    p = sub.add_parser("gc", help="remove the disposable index and leftover temp files")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    sub.add_parser("reindex", help="rebuild the index from the Markdown")
    sub.add_parser("doctor", help="check the store, its records and its index")
    p = sub.add_parser("invoke", help="the version-1 JSON protocol (one request on stdin)")
    p.add_argument("operation", help="search, context, get, remember, update, archive, propose or supersede")
    p = sub.add_parser("mcp", help="run the MCP adapter over stdio")
    p.add_argument("--stdio", action="store_true", required=True, help="required: speak MCP on stdin/stdout")
    p.add_argument("--allow-writes", action="store_true",
                   help="enable memory_remember, memory_update and memory_forget (candidates still need approval)")
    return parser


def _milliseconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of milliseconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError("the interval cannot be negative")
    return value


def _draft_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--title", help="the draft's title (edit it in the editor)")
    p.add_argument("--kind", help="fact, decision, procedure or checkpoint (new records: fact)")
    p.add_argument("--body", help="the draft's body text")


@quiet_on_broken_pipe
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "forget" and args.yes and not args.destroy:
        parser.error("--yes requires --destroy")
    mode = args.mode or "global"
    if args.command is None:
        build_parser().print_help()
        return 0
    if args.command == "invoke":
        return cmd_invoke(mode, args.operation)
    if args.command == "mcp":
        return cmd_mcp(mode, args.allow_writes)
    from . import commands

    try:
        return commands.run(args.command, mode, args)
    except SbufError as exc:
        message = exc.human
        if exc.code == "not_initialized":
            flag = "--project " if mode == "project" else ""
            message += f" (run `sbuf {flag}init` first)"
        print(f"error: {message}", file=sys.stderr)
        if exc.kept_draft is not None:  # an editor command failed after the person saved their text
            print(f"your edited text is kept in {exc.kept_draft}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def cmd_invoke(mode: str, operation: str) -> int:
    from .core import Core, View
    from .invoke import MAX_INPUT_BYTES, answer_stdin, failure

    data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    try:
        core = Core(View.resolve(mode))
    except SbufError:
        def handle(op, _request):
            return failure(op, "internal_error", errors.UNRESOLVED_STORE)
        core = None
    else:
        handle = core.invoke
    try:
        line, ok = answer_stdin(operation, data, handle)
    finally:
        if core is not None:
            core.close()
    try:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    except BrokenPipeError:  # the caller stopped reading; the exit code still tells
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if ok else 1


def cmd_mcp(mode: str, allow_writes: bool) -> int:
    binary = os.environ.get("STORMBUFFER_MCP_BIN")
    if binary:
        argv = [binary, "--stdio", *(["--project"] if mode == "project" else []),
                *(["--allow-writes"] if allow_writes else [])]
        try:
            os.execvp(binary, argv)
        except OSError:
            print(f"error: cannot run {Path(binary).name} (STORMBUFFER_MCP_BIN)", file=sys.stderr)
            return 1
    from .mcp_main import run

    return run(mode, allow_writes)


__all__ = ["main", "build_parser"]


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
