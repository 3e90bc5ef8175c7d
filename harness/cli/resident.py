"""Commands that a project's resident query process can answer.

A read-only command opts in with one call::

    def _symbol(ws, args) -> int:      # prints its answer, returns the exit code
        ...
    cmd_symbol = resident_command("symbol", _symbol)
    p.set_defaults(func=cmd_symbol)

``cmd_symbol(args)`` then asks the project's daemon to run ``_symbol`` (starting
one in the background when none runs) and falls back to running it here,
with the workspace opened as every read-only command opens it.  Either way
the caller sees the same bytes: the daemon runs the same handler with the
same arguments and working directory and sends back what it printed.

A handler must print only through ``sys.stdout``/``sys.stderr`` (``print``),
keep its arguments JSON-serialisable (a namespace that is not is answered
in-process), and not depend on the terminal or environment variables: the
daemon has neither of the caller's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from memstrata.harness.daemon import client
from memstrata.indexer.project import ProjectError, holds_index, index_dir, resolve_root
from memstrata.storage import StoreError

from . import argtypes
from .reading import NotIndexed, fail, open_indexed

Handler = Callable[[object, argparse.Namespace], int]

_HANDLERS: dict[str, Handler] = {}


def resident_command(name: str, handler: Handler) -> Callable[[argparse.Namespace], int]:
    """The CLI entry for ``handler(ws, args)``, answered by the daemon when it can."""
    _HANDLERS[name] = handler

    def command(args: argparse.Namespace) -> int:
        outcome = _ask_daemon(name, args)
        if outcome.answer is not None:
            sys.stdout.write(outcome.answer.stdout)
            sys.stdout.flush()  # before stderr, as in-process: a reader that went away ends it here
            sys.stderr.write(outcome.answer.stderr)
            return outcome.answer.exit
        code = run_in_process(args, handler)
        if outcome.start is not None:
            # The answer is out before the daemon's start-up competes with it.
            sys.stdout.flush()
            sys.stderr.flush()
            outcome.start()
        return code

    command.__name__ = command.__qualname__ = f"cmd_{name}"
    command.__doc__ = handler.__doc__
    return command


def handlers() -> dict[str, Handler]:
    """Every handler registered so far (the daemon serves these)."""
    return dict(_HANDLERS)


def run_in_process(args: argparse.Namespace, handler: Handler) -> int:
    try:
        ws = open_indexed(argtypes.project_of(args), argtypes.store_of(args))
    except NotIndexed as exc:
        return fail(str(exc))
    except (ProjectError, StoreError) as exc:
        return fail(str(exc))
    try:
        return handler(ws, args)
    finally:
        ws.close()


def _shared(args: argparse.Namespace) -> bool:
    try:
        return argtypes.store_of(args).shared
    except StoreError:  # the in-process run says what is wrong
        return True


def _ask_daemon(name: str, args: argparse.Namespace) -> client.Outcome:
    if not client.enabled() or _shared(args):
        # The resident process serves a project's own SQLite index; a shared
        # store is read in-process.
        return client.Outcome()
    try:
        root = resolve_root(argtypes.project_of(args))
        cwd = os.getcwd()
        folder = index_dir(root)
        if not holds_index(root):
            return client.Outcome()
    except (ProjectError, OSError):  # the in-process run says what is wrong
        return client.Outcome()
    payload = {k: v for k, v in vars(args).items() if k != "func"}
    try:
        json.dumps(payload)
    except (TypeError, ValueError):
        return client.Outcome()
    return client.ask(root, folder, name, payload, cwd)
