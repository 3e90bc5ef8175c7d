"""``memstrata daemon status|stop|start|run``: the project's resident query process."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import time
from pathlib import Path

from memstrata.harness.daemon import client, sockets
from memstrata.harness.daemon.server import DEFAULT_IDLE_TIMEOUT, Daemon
from memstrata.indexer.project import INDEX_FILE, ProjectError, checked_index_dir, resolve_root

from . import argtypes
from .reading import NOT_INDEXED, fail, open_indexed
from .resident import handlers


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "daemon", help="the project's resident query process (status, stop, start)",
        description="`memstrata query` (and `symbol`, `refs`, `outline`) asks a per-project background "
        "process that keeps the index, graph and tokenizer loaded, over the Unix socket "
        ".memstrata/daemon.sock (yours only: mode 0600, your uid checked on both ends). The first query starts it in the background and is "
        "answered in-process; it leaves after an idle period (default 10 minutes, "
        "MEMSTRATA_DAEMON_IDLE=SECONDS). Answers are byte for byte those of an in-process run, which "
        "is also what happens whenever the daemon cannot answer. MEMSTRATA_DAEMON=off turns it off.")
    dsub = p.add_subparsers(dest="daemon_command", metavar="ACTION")
    dsub.required = True

    status = dsub.add_parser("status", help="is a daemon running for the project, since when, how busy")
    argtypes.add_project(status, store=False)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=cmd_status)

    stop = dsub.add_parser("stop", help="stop the project's daemon (and remove a socket a killed one left)")
    argtypes.add_project(stop, store=False)
    stop.set_defaults(func=cmd_stop)

    start = dsub.add_parser("start", help="start the project's daemon in the background and wait until it answers")
    argtypes.add_project(start, store=False)
    _add_idle(start)
    start.set_defaults(func=cmd_start)

    run = dsub.add_parser("run", help="run the project's daemon in the foreground (what `start` runs)")
    argtypes.add_project(run, store=False)
    _add_idle(run)
    run.add_argument("--lock-wait", type=argtypes.non_negative, default=0.5, metavar="SECONDS",
                     help="how long to wait for a daemon being replaced to let go (default 0.5)")
    run.add_argument("--replacing", action="store_true",
                     help="take over from a daemon of another build that was told to stop")
    run.add_argument("--requested-at", type=int, default=None, metavar="NS",
                     help="when this start was asked for (ns since the epoch): a `daemon stop` "
                          "since then cancels it")
    run.set_defaults(func=cmd_run)


def _add_idle(p: argparse.ArgumentParser) -> None:
    p.add_argument("--idle-timeout", type=argtypes.positive, default=None, metavar="SECONDS",
                   help="leave after this long without a request (default: MEMSTRATA_DAEMON_IDLE, else 600)")


def _idle_timeout(args) -> float:
    if args.idle_timeout is not None:
        return args.idle_timeout
    return client.idle_setting() or DEFAULT_IDLE_TIMEOUT


def _indexed_root(args) -> tuple[Path, Path] | None:
    root = resolve_root(argtypes.project_of(args))
    folder = checked_index_dir(root)
    return (root, folder) if (folder / INDEX_FILE).is_file() else None


def _on_project(needs_index: bool):
    """A daemon subcommand run as ``body(args, found)``: ``found`` is the
    project's (root, index folder), or None when it was never indexed (refused
    with one sentence when ``needs_index``); a bad project is one sentence too."""
    def wrap(body):
        def command(args) -> int:
            try:
                found = _indexed_root(args)
            except ProjectError as exc:
                return fail(str(exc))
            if found is None and needs_index:
                return fail(NOT_INDEXED)
            return body(args, found)
        command.__name__ = body.__name__
        return command
    return wrap


@_on_project(needs_index=False)
def cmd_status(args, found) -> int:
    if found is None:
        state = client.DaemonState(running=False)
    else:
        state = client.status(found[1])
    if args.json:
        out = {"running": state.running, "pid": state.pid, "build": state.build, "same_build": state.same_build,
               "stale_socket": state.stale_socket, "refused": state.refused, "answering": state.answering,
               "stopped": state.stopped}
        if state.info:
            out.update({k: state.info[k] for k in ("started", "uptime", "idle_timeout", "served") if k in state.info})
        print(json.dumps(out, indent=2))
        return 0
    if found is None:
        print(f"not running ({NOT_INDEXED})")
    elif state.refused:
        print(f"not used: {state.refused}")
    elif state.info:
        info = state.info
        served = f"{info['served']} request{'' if info['served'] == 1 else 's'} served"
        print(f"running: pid {state.pid}, up {_duration(info['uptime'])}, {served}, "
              f"leaves after {_duration(info['idle_timeout'])} idle")
    elif state.pid and state.stopped:
        print(f"running: pid {state.pid}, but stopped (not answering); the next query replaces it")
    elif state.pid and not state.answering:
        print(f"running: pid {state.pid}, busy (it did not answer within {client.CONNECT_TIMEOUT:.0f} s); "
              "queries answer in-process meanwhile")
    elif state.pid:
        print(f"running: pid {state.pid}, another MemStrata build ({state.build or 'unknown'}); "
              "the next query replaces it")
    elif state.running:
        print("starting")
    else:
        print("not running" + (" (a killed daemon's socket is left; the next query replaces it)"
                               if state.stale_socket else ""))
    return 0


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


@_on_project(needs_index=False)
def cmd_stop(args, found) -> int:
    if found is None:
        print("not running")
        return 0
    before = client.stop(found[1])
    if before.left_running is not None:
        return fail(f"the daemon (pid {before.left_running}) did not stop" if before.left_running
                    else "a daemon still runs for the project: it did not stop")
    if before.pid:
        print(f"stopped (pid {before.pid})")
    elif before.removed == "socket":
        print("not running (removed the socket a killed daemon left)")
    elif before.removed:
        print(f"not running (removed the {before.removed} that sat where its socket goes)")
    elif (left := _left_at_socket(found[1])) is not None:
        return fail(f"not running, but {left}: not removed (move it away yourself)")
    else:
        print("not running")
    return 0


def _left_at_socket(index_folder) -> str | None:
    """What still sits at the socket's path once stop cleared what it may (a folder with files
    in it, another user's file are never removed), said for the user; None when nothing does."""
    path = sockets.socket_path(index_folder)
    try:
        sockets.check_socket_file(path)
    except sockets.Refused as exc:
        return str(exc)
    except OSError:
        pass
    return None


@_on_project(needs_index=True)
def cmd_start(args, found) -> int:
    root, folder = found
    state = client.status(folder)
    if state.refused:
        return fail(f"not starting: {state.refused} (`memstrata daemon stop` removes it when it is yours)")
    if state.info is not None and state.same_build:
        print(f"already running (pid {state.pid})")
        return 0
    if state.running:
        client.stop(folder)
    if args.idle_timeout is not None:
        os.environ[client.ENV_IDLE] = str(args.idle_timeout)
    proc = client.spawn(root, folder, after_parent=False)
    if proc is None:
        return fail(f"cannot start a daemon: {folder.name}/ is not writable")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = client.status(folder)
        if state.info is not None and state.same_build:
            print(f"started (pid {state.pid})")
            return 0
        if proc.poll() is not None and not state.running:
            break
        time.sleep(0.05)
    why = f"see {folder.name}/{sockets.LOG_NAME}"
    try:
        if shutil.disk_usage(folder).free < 1024 * 1024:  # nothing, not even its log, can be written
            why = f"the disk holding {folder.name}/ is full"
    except OSError:
        pass
    return fail(f"the daemon did not start ({why})")


@_on_project(needs_index=True)
def cmd_run(args, found) -> int:
    root, folder = found
    # The commands register their handlers as their modules load.
    from . import build_parser

    build_parser()
    logging.getLogger("memstrata.harness.daemon").setLevel(logging.INFO)
    daemon = Daemon(root, folder, handlers(), open_workspace=open_indexed, warm=_warm,
                    idle_timeout=_idle_timeout(args), index_file=INDEX_FILE, lock_wait=args.lock_wait,
                    replacing=args.replacing, requested_at=args.requested_at)
    return daemon.run()


def _warm(ws) -> None:
    """Load what the first question would: the graph and the tokenizer."""
    from memstrata.compressor import count_tokens
    from memstrata.compressor.file_counts import start_counting

    ws.graph  # noqa: B018 - the property loads the graph snapshot
    count_tokens("warm")
    start_counting(ws)
