"""The ``kura`` command line (a Kura-compatible keyword-RAG server on MemStrata's store)."""

from __future__ import annotations

import argparse
import fcntl
import io
import logging
import shutil
import sys
from pathlib import Path

from memstrata import __version__

from memstrata.console import inert_on_terminal, quiet_on_broken_pipe
from .registry import Entry, Home, KuraError, normalize_name, now_rfc3339
from .store import KuraDatabase

USAGE = """\
kura                        start the background daemon (if needed) and print its address
kura add <name> [PATH]      register a database: index PATH in place, or create an inbox folder
kura list                   list the databases
kura remove <name> [--yes]  remove a database and its index (asks first)
kura edit <old> <new>       rename a database
kura stop                   stop the daemon
kura port set <1-65535>     pin the daemon's port (restarts a running daemon)
kura port clear             go back to a random free port (restarts a running daemon)
kura remote enable|disable  serve MCP over HTTP at <address>/mcp (restarts a running daemon)
kura mcp                    run the MCP server over stdio (for MCP clients)
kura help                   show this help

Home: ~/.config/kuradb (set KURA_HOME to use another folder).
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors: short message, exit 2
        print(f"kura: {message}\n\n{USAGE}", file=sys.stderr, end="")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kura", usage=USAGE, add_help=False)
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("--version", action="version", version=f"kura (memstrata) {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    p = sub.add_parser("add", add_help=False)
    p.add_argument("name")
    p.add_argument("path", nargs="?")
    sub.add_parser("list", add_help=False)
    p = sub.add_parser("remove", add_help=False)
    p.add_argument("name")
    p.add_argument("-y", "--yes", action="store_true")
    p = sub.add_parser("edit", add_help=False)
    p.add_argument("old")
    p.add_argument("new")
    sub.add_parser("stop", add_help=False)
    p = sub.add_parser("port", add_help=False)
    p.add_argument("action", choices=["set", "clear"])
    p.add_argument("port", nargs="?")
    p = sub.add_parser("remote", add_help=False)
    p.add_argument("action", choices=["enable", "disable"])
    sub.add_parser("mcp", add_help=False)
    sub.add_parser("help", add_help=False)
    return parser


# `kura daemon` runs the daemon in the foreground: what `kura` starts in the
# background.  It is internal, so it is kept out of the parser, whose errors
# list every command it knows.
DAEMON_ARGV = ["daemon"]


def command_usage(command: str) -> str | None:
    """The usage lines of one command (``kura add --help``), or None for an unknown one."""
    lines = [line for line in USAGE.splitlines() if line.split()[1:2] == [command]]
    return "\n".join(lines) + "\n" if lines else None


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """argparse's answer, but an unknown option is named before a missing argument: `kura add -x`
    is a mistyped option, not a missing name."""
    known = ("-y", "--yes", "-h", "--help")
    unknown = [a for a in argv[1:] if a.startswith("-") and a != "-" and a not in known and not a[1:].isdigit()]
    if unknown:
        parser.error(f"unknown option {unknown[0]}")
    return parser.parse_args(argv)


def _usage_error(message: str) -> None:
    print(f"kura: {message}\n\n{USAGE}", file=sys.stderr, end="")
    raise SystemExit(2)


@quiet_on_broken_pipe
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # What reaches a terminal shows control characters escaped: it names folders, files and
    # databases a person or an agent chose (a name with an escape sequence would drive the
    # terminal).  A pipe gets the text as it is; `kura mcp`'s stdout is its protocol channel.
    sys.stderr = inert_on_terminal(sys.stderr)
    # `kura add --help` answers with that command's lines before argparse
    # could complain that the command's own arguments are missing.
    if len(argv) >= 2 and ("-h" in argv[1:] or "--help" in argv[1:]):
        usage = command_usage(argv[0])
        if usage is not None:
            print(usage, end="")
            return 0
    args = None if argv == DAEMON_ARGV else _parse(build_parser(), argv)
    if args is not None and args.command != "mcp":
        sys.stdout = inert_on_terminal(sys.stdout)
    if args is not None and (args.help or args.command == "help"):
        print(USAGE, end="")
        return 0
    home = Home()
    try:
        if args is None:
            from .daemon import run_daemon

            return run_daemon(home, __version__)
        if args.command == "mcp":
            return cmd_mcp(home)
        handler = {
            None: cmd_start, "add": cmd_add, "list": cmd_list, "remove": cmd_remove,
            "edit": cmd_edit, "stop": cmd_stop, "port": cmd_port, "remote": cmd_remote,
        }[args.command]
        return handler(home, args)
    except KuraError as exc:
        print(f"kura: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kura: interrupted", file=sys.stderr)
        return 130


# -- commands ------------------------------------------------------------------------


def cmd_start(home: Home, _args=None) -> int:
    from .daemon import ensure_running

    started = ensure_running(home)
    state = "started" if started.started else "running"
    print(f"kura {state} at {started.url}")
    if home.remote():
        print(f"MCP at {started.url}/mcp (Streamable HTTP; SSE clients: {started.url}/sse)")
    return 0


def cmd_add(home: Home, args) -> int:
    from . import store as kura_store

    from .daemon import notify_reload
    from .chunking import DocumentFilter
    from .indexing import sync_folder

    name = normalize_name(args.name)
    root: Path | None = None
    if args.path is not None:
        root = Path(args.path).expanduser().resolve()
        if not root.is_dir():
            raise KuraError(f"{args.path} is not a folder")
        if root == home.root.resolve() or home.root.resolve() in root.parents:
            raise KuraError(f"{args.path} is inside the Kura home, which holds Kura's own files; "
                            "register a folder of documents")
    folder = home.db_dir(name)
    with home.locked():
        if home.find(name) is not None:
            raise KuraError(f'database "{name}" already exists')
        if folder.exists():
            if not _abandoned(folder, name):
                raise KuraError(f"{folder} already exists; remove it or choose another name")
            shutil.rmtree(folder)
            print(f'removed what an interrupted `kura add {name}` left', file=sys.stderr)
        folder.mkdir(parents=True)
        marker = open(folder / ADDING, "a+")  # held until the database is registered
        fcntl.flock(marker, fcntl.LOCK_EX)
    try:
        with KuraDatabase(home.db_path(name)) as store:
            if root is not None:
                kura_store.set_root(store, str(root))
                print(f"indexing {root} ...", file=sys.stderr, flush=True)
                report = sync_folder(store, root, DocumentFilter(root, reserved=home.root))
                stats = kura_store.stats(store)
            else:
                home.inbox(name).mkdir()
        with home.locked():
            if home.find(name) is not None:  # lost a race with another `kura add`
                raise KuraError(f'database "{name}" already exists')
            home.save_entries([*home.entries(), Entry(name, now_rfc3339())])
            (folder / ADDING).unlink()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        marker.close()
    notify_reload(home)
    if root is None:
        print(f'added "{name}": drop files into {home.inbox(name)}')
    else:
        print(f'added "{name}": {root} ({stats.sources} files, {stats.chunks} chunks'
              f'{skipped_suffix(report.skipped_counts())})')
    return 0


# A database folder being filled by `kura add` holds this file, locked while the add runs: one
# found unlocked is what an add killed before it could clean up left (a SIGKILL, a lost session).
ADDING = ".adding"


def _abandoned(folder: Path, name: str) -> bool:
    """Whether ``folder`` is an unregistered database folder that an interrupted add left."""
    marker = folder / ADDING
    if not marker.is_file():
        return False
    with open(marker, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise KuraError(f'another `kura add {name}` is adding this database now') from None
    return True


def skipped_suffix(counts: dict[str, int]) -> str:
    """``", 3 skipped (2 excluded_dir, 1 symlink_outside_project)"``, or "" when nothing was."""
    total = sum(counts.values())
    if not total:
        return ""
    return f", {total} skipped (" + ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items())) + ")"


def cmd_list(home: Home, _args) -> int:
    from .daemon import api, running_url

    entries = home.entries()
    if not entries:
        print("no databases; add one with `kura add <name> [PATH]`")
        return 0
    url = running_url(home)
    rows: list[dict] = []
    if url is not None:
        try:
            rows = api(url, "/api/status")["databases"]
        except Exception:  # noqa: BLE001 - fall back to reading the stores ourselves
            rows = []
    if not rows:
        rows = [_offline_status(home, e) for e in entries]
    for row in rows:
        if row.get("loaded") or "sources" in row:
            detail = (f"{row['sources']} files, {row['chunks']} chunks{skipped_suffix(row.get('skipped') or {})}"
                      f"  {row.get('root', '')}")
        else:
            detail = f"not loaded: {row.get('problem', 'unknown')}"
        print(f"{row['db']}\t{row['createAt']}\t{detail}")
    if url is None:
        print("(daemon not running; start it with `kura`)", file=sys.stderr)
    return 0


def _offline_status(home: Home, entry: Entry) -> dict:
    from . import store as kura_store

    from .library import database_root

    row: dict = entry.as_dict()
    try:
        path = home.db_path(entry.db)
    except KuraError as exc:  # a registry entry edited by hand
        row["problem"] = str(exc)
        return row
    if not path.exists():
        row["problem"] = f"{path} is missing"
        return row
    try:
        with KuraDatabase(path, readonly=True) as store:
            st = kura_store.stats(store)
            row.update(sources=st.sources, chunks=st.chunks, skipped=kura_store.get_skipped(store),
                       root=str(database_root(home, entry.db, store)))
    except Exception as exc:  # noqa: BLE001
        row["problem"] = str(exc)
    return row


def cmd_remove(home: Home, args) -> int:
    from .daemon import notify_reload

    name = normalize_name(args.name)
    folder = home.db_dir(name)
    if home.find(name) is None:
        with home.locked():
            if home.find(name) is None and folder.is_dir() and _abandoned(folder, name):
                shutil.rmtree(folder)
                print(f'removed what an interrupted `kura add {name}` left')
                return 0
        raise KuraError(f'database "{name}" not exist')
    if not args.yes:
        inbox = home.inbox(name)
        extra = f" and the files in {inbox}" if inbox.is_dir() and any(inbox.iterdir()) else ""
        prompt = f'Remove database "{name}" (its index{extra})? [y/N] '
        print(prompt, end="", flush=True, file=sys.stderr)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            print("cancelled", file=sys.stderr)
            return 1
    with home.locked():
        home.save_entries([e for e in home.entries() if e.db != name])
    notify_reload(home)  # the daemon closes the store before the folder goes
    shutil.rmtree(folder, ignore_errors=True)
    print(f'removed "{name}"')
    return 0


def cmd_edit(home: Home, args) -> int:
    from .daemon import notify_reload

    old = normalize_name(args.old)
    new = normalize_name(args.new)
    with home.locked():
        entries = home.entries()
        if not any(e.db == old for e in entries):
            raise KuraError(f'database "{old}" not exist')
        if old == new:
            return 0
        if any(e.db == new for e in entries):
            raise KuraError(f'database "{new}" already exists')
        if home.db_dir(new).exists():
            raise KuraError(f"{home.db_dir(new)} already exists")
        if home.db_dir(old).exists():
            home.db_dir(old).rename(home.db_dir(new))
        home.save_entries([Entry(new, e.createAt) if e.db == old else e for e in entries])
    notify_reload(home)
    print(f'renamed "{old}" to "{new}"')
    return 0


def cmd_stop(home: Home, _args) -> int:
    from .daemon import stop

    print("kura stopped" if stop(home) else "kura is not running")
    return 0


def _restart_if_running(home: Home) -> None:
    from .daemon import lock_held, stop

    if lock_held(home):
        stop(home)
        cmd_start(home)


def cmd_port(home: Home, args) -> int:
    if args.action == "set":
        try:
            port = int(args.port or "")
        except ValueError:
            _usage_error(f"port must be a number from 1 to 65535, not {args.port!r}")
        if not 1 <= port <= 65535:
            _usage_error(f"port must be from 1 to 65535, not {port}")
        home.update_config(port=port)
        print(f"port set to {port}")
    else:
        if args.port is not None:
            _usage_error("`kura port clear` takes no argument")
        home.update_config(port=None)
        print("port cleared (a free port is chosen at start)")
    _restart_if_running(home)
    return 0


def cmd_remote(home: Home, args) -> int:
    enable = args.action == "enable"
    home.update_config(remote=True if enable else None)
    print(f"remote MCP {'enabled' if enable else 'disabled'}")
    _restart_if_running(home)
    return 0


def cmd_mcp(home: Home) -> int:
    """stdio MCP: read-only access to every registered database, no watcher."""
    # Protocol only on stdout: logs to stderr (configured before MCPServer is
    # built), and stray prints unbuffered so they cannot reach the wire later.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="kura mcp: %(levelname)s %(message)s")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)
    from .mcp import build_kura_server
    from .search import KuraSearch
    from memstrata.mcp_server.stdio import run_stdio_server

    from .library import Library

    library = Library(home, live=False, follow=True)
    library.reload()  # a database that cannot be opened is logged to stderr and skipped
    server = build_kura_server(KuraSearch(library), version=__version__)
    return run_stdio_server(server, library.close, interrupted="kura: interrupted")


if __name__ == "__main__":
    sys.exit(main())
