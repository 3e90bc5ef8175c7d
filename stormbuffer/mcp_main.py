"""``stormbuffer-mcp --stdio [--global | --project] [--allow-writes]``: the MCP adapter process.

stdout carries the protocol and nothing else: the process keeps a private
duplicate of fd 1 for it and points fd 1 (and ``sys.stdout``) at stderr, so a
stray print can never corrupt the stream.  Logs go to stderr.  The store is
resolved once, from the working directory at start-up; connecting never
initializes it.  Closing stdin ends the process once every request already
read has been answered.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass

from memstrata import __version__

PROG = "stormbuffer-mcp"
USAGE = f"usage: {PROG} --stdio [--global | --project] [--allow-writes]\n"
HELP = USAGE + f"""
Serve Stormbuffer memory to an MCP host over stdio (newline-delimited JSON-RPC 2.0).

  --stdio          required: speak MCP on stdin/stdout
  --global         use the global store (the default): $XDG_DATA_HOME/stormbuffer
  --project        use the nearest .sbuf/ store from the working directory (reads
                   also see the global store when it is initialized)
  --allow-writes   enable memory_remember, memory_update and memory_forget;
                   remember and update still only create candidates that a
                   person approves with `sbuf approve`
  -h, --help       show this help
  -V, --version    show the version

Tools: memory_recall, memory_get, memory_remember, memory_update, memory_forget.
Resources: stormbuffer://record/{{id}}, stormbuffer://candidate/{{id}},
stormbuffer://scope/{{scope}}/records.
"""


@dataclass(slots=True)
class Flags:
    mode: str = "global"
    allow_writes: bool = False


class UsageError(Exception):
    pass


def parse_flags(argv: list[str]) -> Flags | str:
    """The flags, or "help" / "version" when one of those was asked for."""
    flags = Flags()
    stdio = False
    store_flag: str | None = None
    for arg in argv:
        if arg in ("-h", "--help"):
            return "help"
        if arg in ("-V", "--version"):
            return "version"
        if arg == "--stdio":
            stdio = True
        elif arg == "--allow-writes":
            flags.allow_writes = True
        elif arg in ("--global", "--project"):
            if store_flag is not None and store_flag != arg:
                raise UsageError(f"{arg} conflicts with {store_flag}")
            store_flag = arg
            flags.mode = arg[2:]
        else:
            raise UsageError("unknown argument")
    if not stdio:
        raise UsageError("--stdio is required")
    return flags


def main(argv: list[str] | None = None) -> int:
    try:
        flags = parse_flags(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    if flags == "help":
        sys.stdout.write(HELP)
        return 0
    if flags == "version":
        print(f"{PROG} {__version__}")
        return 0
    return run(flags.mode, flags.allow_writes)


def run(mode: str, allow_writes: bool) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format=f"{PROG}: %(message)s")
    from .mcp import StormbufferMcp, serve_stdio

    from .core import Core, View
    from .errors import SbufError

    try:
        view = View.resolve(mode, watch=True)
        protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
        sys.stdout.flush()
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    except (SbufError, OSError, ValueError):
        print(f"{PROG}: could not start the stdio adapter", file=sys.stderr)
        return 1
    sys.stdout = sys.stderr
    core = Core(view)
    server = StormbufferMcp(core, store_kind=view.selected.kind, allow_writes=allow_writes, version=__version__)
    started = True
    try:
        # While idle, every record file is stat-ed now and then, as a check on the change feed.
        started = serve_stdio(server, sys.stdin.buffer, protocol_out, idle=core.idle)
    except KeyboardInterrupt:
        pass
    finally:
        core.close()
        try:
            protocol_out.close()
        except OSError:
            pass
    if not started:
        # As Stormbuffer's main reports any failure of rmcp's handshake.
        print(f"{PROG}: could not start the stdio adapter", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
