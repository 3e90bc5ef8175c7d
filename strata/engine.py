"""The Strata command executor on MemStrata's store.

:class:`Engine` runs one wire command (a ``{"type": ..., ...}`` object) and
answers what the real engine answers: an output envelope ``{"type", "data"}``,
an error status, or the deserializer's sentence.  It holds what every command
runs against: the open store, the session branch, branch and space scoping,
time-travel views and commit receipts.  The commands themselves are handlers
in the family modules, found through the registry in
:mod:`memstrata.strata.commands`; they register when imported, which is why
this module imports them all although it names none of them.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .store import DEFAULT_BRANCH, Branch, StrataStore, View

from . import errors
from .catalog import WIRE_TYPES
from .commands import HANDLERS, check_branch_name, check_space, dumps
from .errors import StrataError
from .names import check_object_names
from .wire import SPECS, NumberRangeError, WireError, check_number_range, command_type

# Imported for their side effect: each registers its handlers in HANDLERS.
from . import admin, branches, events, graph, jsondocs, kv, vectors  # noqa: F401
from . import graph_analytics, graph_batch  # noqa: F401
from . import merges, ontology  # noqa: F401

log = logging.getLogger("memstrata.strata")
_KNOWN = frozenset(WIRE_TYPES)


@dataclass(slots=True)
class Outcome:
    """What one command produced: exactly one of envelope, error status, wire message."""

    envelope: dict | None = None
    error: dict | None = None
    invalid: str | None = None

    def text(self) -> str:
        if self.envelope is not None:
            return dumps(self.envelope)
        if self.error is not None:
            return dumps({"error": self.error})
        return self.invalid or ""


class Engine:
    """Runs wire commands against one open :class:`StrataStore`."""

    def __init__(self, store: StrataStore, *, session_branch: str = DEFAULT_BRANCH):
        self.store = store
        self.session_branch = session_branch
        self.durability = "standard" if store.durable else "not_durable"
        self._instance = secrets.token_hex(4)
        self._errors = 0
        # Per-family caches (the vector index) keyed by what invalidates them.
        self.caches: dict[str, dict] = {}

    # -- running commands ---------------------------------------------------------

    def run(self, command: Any) -> Outcome:
        try:
            # Other processes may serve the same database: the command holds it from its first read
            # to its last write, and starts from what they committed (see StrataStore.hold).
            moved = self.store.hold()
            try:
                if moved:
                    self.caches.clear()  # built from rows another process may have changed
                check_number_range(command)
                wire = command_type(command, _KNOWN, WIRE_TYPES)
                spec = SPECS.get(wire)
                if spec is None:
                    raise errors.unsupported_command(wire)
                args = spec.decode(command)
                return Outcome(envelope=HANDLERS[wire](self, args))
            finally:
                if moved is not None:
                    self.store.release()
        except WireError as exc:
            return Outcome(invalid=str(exc))
        except NumberRangeError:
            return self._failure(StrataError("invalid_argument.executor.json_number",
                                             "a JSON integer is outside the supported i64/u64 range"))
        except StrataError as exc:
            return self._failure(exc)
        except (sqlite3.Error, OSError) as exc:
            # A full disk or a vanished folder: nothing was committed (the
            # transaction rolled back); say so without paths or a traceback.
            log.error("storage failure: %s", exc)
            return self._failure(StrataError("internal.server.storage",
                                             f"the database could not complete the command: {_brief(exc)}"))

    def _failure(self, exc: StrataError) -> Outcome:
        return Outcome(error=self.error_status(exc))

    def error_status(self, exc: StrataError) -> dict:
        """The status of a failure, with the next reference id (a batch item's error takes one too)."""
        self._errors += 1
        return exc.status(f"err_local_{self._instance}_{self._errors:06d}")

    # -- scope --------------------------------------------------------------------

    def branch(self, name: str | None, *, source: bool = False) -> Branch:
        name = self.session_branch if name is None else name
        check_branch_name(name)
        b = self.store.branch(name)
        if b is None:
            raise errors.branch_missing(name, source=source)
        return b

    def scope(self, args: dict, checks: Callable[[], object] | None = None) -> tuple[Branch, str]:
        # The engine checks the object's names, an as_of conflict, then what a write carries
        # (``checks``: an event's type and payload, a node's id and properties, a JSON value),
        # then both scope names, before it looks the branch up.
        check_object_names(args)
        self.check_as_of(args)
        if checks is not None:
            checks()
        name = self.session_branch if args.get("branch") is None else args["branch"]
        check_branch_name(name)
        b = self.instant_first(args)
        if b is not None:
            return b, check_space(args.get("space"))
        space = check_space(args.get("space"))
        return self.branch(name), space

    def instant_first(self, args: dict) -> Branch | None:
        """A read at a wall-clock instant finds its branch and the instant on the branch's
        timeline before it looks at the space name (or a query's vector), as the engine's
        does: the branch, or None for any other read."""
        if args.get("as_of_time") is None:
            return None
        b = self.branch(args.get("branch"))
        self.read_view(b, args)
        return b

    @staticmethod
    def check_as_of(args: dict) -> None:
        if args.get("as_of") is not None and args.get("as_of_time") is not None:
            raise StrataError(
                "invalid_argument.executor.as_of_conflict",
                "as_of and as_of_time are mutually exclusive: pass a commit timestamp or a wall-clock "
                "instant, not both")

    def read_view(self, b: Branch, args: dict) -> View:
        """The view a read sees: the head, or the state after the commit ``as_of`` names."""
        self.check_as_of(args)
        as_of, as_of_time = args.get("as_of"), args.get("as_of_time")
        if as_of_time is not None:
            version = self.store.timeline_version_at(b, as_of_time, by_time=True)
            if version is None:
                raise errors.history("wall-clock instant is before the first dated commit")
            newest = self.store.commit_of(self.store.latest(b.id))
            if newest is not None and as_of_time > newest.committed_at:
                raise errors.history("wall-clock instant is after the latest dated commit")
            return self.store.view(b, version)
        if as_of is None:
            return self.store.view(b)
        return self.view_at(b, as_of)

    def view_at(self, b: Branch, version: int) -> View:
        """The state of ``b`` after commit ``version``, refused outside the branch's retained timeline."""
        if version < self.store.timeline_start(b):
            raise errors.history("timestamp is before retained timeline history")
        if version > self.store.latest(b.id):
            raise errors.history("timestamp is after latest retained timeline history")
        return self.store.view(b, version)

    def receipt(self, tx, puts: int, deletes: int = 0) -> dict:
        return {"version": tx.version, "timestamp": tx.version, "committed_at": tx.committed_at,
                "durability": self.durability, "put_count": puts, "delete_count": deletes}


def _brief(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc).split(":")[0]
