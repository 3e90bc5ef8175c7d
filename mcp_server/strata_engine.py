"""The Strata command executor on MemStrata's store.

:class:`Engine` runs one wire command (a ``{"type": ..., ...}`` object) and
answers what the real engine answers: an output envelope ``{"type", "data"}``,
an error status, or the deserializer's sentence.  The handlers live beside
this module, one per family (``strata_kv``, ``strata_json``, ``strata_vectors``,
``strata_events``, ``strata_graph``); this module holds what they share:
branch and space scoping, time-travel views, commits and their receipts.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import sqlite3
import sys
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable

from memstrata import __version__
from memstrata.storage.strata_store import (
    DEFAULT_BRANCH, DEFAULT_SPACE, FAILED_FORK_VERSIONS, Branch, StrataStore, View,
)

from . import strata_errors as errors
from .strata_catalog import WIRE_TYPES
from .strata_errors import StrataError
from .strata_wire import SPECS, NumberRangeError, WireError, check_number_range, command_type

log = logging.getLogger("memstrata.strata")
_KNOWN = frozenset(WIRE_TYPES)

NIL_UUID = "00000000-0000-0000-0000-000000000000"


# -- JSON text as the engine writes it ------------------------------------------------

_EXP = re.compile(r"e-0+(?=\d)")


_ENCODERS = {flag: json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=flag)
             for flag in (False, True)}


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON, non-ASCII kept, floats as the engine prints them (``1e-7``, not ``1e-07``)."""
    text = _ENCODERS[sort_keys].encode(value)
    if "e-0" not in text:
        return text
    # Only Python's two-digit negative exponents differ; re-encode with those
    # floats swapped for markers so that strings are never touched.
    fixed: dict[str, str] = {}

    def mark(v: Any) -> Any:
        if type(v) is float:
            r = repr(v)
            if "e-0" in r:
                marker = f"\x00{len(fixed)}\x00"
                fixed[json.dumps(marker)] = _EXP.sub("e-", r)
                return marker
            return v
        if isinstance(v, dict):
            return {k: mark(x) for k, x in v.items()}
        if isinstance(v, list):
            return [mark(x) for x in v]
        return v

    text = _ENCODERS[sort_keys].encode(mark(value))
    for marker, number in fixed.items():
        text = text.replace(marker, number)
    return text


def canonical(value: Any) -> str:
    """Stored form of a user JSON value: keys sorted, as the engine keeps them."""
    return dumps(value, sort_keys=True)


# -- outcomes ---------------------------------------------------------------------------


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


EFFECT_CREATED = {"applied": True, "kind": "created", "matched": False, "affected_count": 1}
EFFECT_UPDATED = {"applied": True, "kind": "updated", "matched": True, "affected_count": 1}
EFFECT_DELETED = {"applied": True, "kind": "deleted", "matched": True, "affected_count": 1}
EFFECT_NOT_FOUND = {"applied": False, "kind": "not_found", "matched": False, "affected_count": 0}
EFFECT_UNCHANGED = {"applied": False, "kind": "unchanged", "matched": True, "affected_count": 0}


def effect(created: bool) -> dict:
    return dict(EFFECT_CREATED if created else EFFECT_UPDATED)


def page(items: list, has_more: bool, cursor: Any) -> dict:
    return {"items": items, "has_more": has_more, "cursor": cursor if has_more else None}


def found(kind: str, value: Any) -> dict:
    """A point read's envelope: ``{"found": false, "value": null}`` on a miss, never an error."""
    return {"type": kind, "data": {"found": value is not None, "value": value}}


def name_page(kind: str, entries: Iterable, limit: int | None) -> dict:
    """A page of names (the decoded keys of ``entries``); the cursor is the last name returned."""
    rows, has_more = take(entries, limit)
    names = [x.key.decode("utf-8") for x in rows]
    return {"type": kind, "data": page(names, has_more, names[-1] if has_more else None)}


def take(items: Iterable, limit: int | None) -> tuple[list, bool]:
    """The first ``limit`` items (all when None) and whether more follow, reading one extra at most."""
    if limit is None:
        return list(items), False
    if limit == 0:
        return [], False
    got = list(islice(items, min(limit, sys.maxsize - 1) + 1))
    return got[:limit], len(got) > limit


def batch_for(limit: int | None) -> int:
    """How many rows a paged read fetches per level at first."""
    return 256 if limit is None else max(1, min(limit + 1, 4096))


Handler = Callable[["Engine", dict], dict]
HANDLERS: dict[str, Handler] = {}


def handler(wire: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[wire] = fn
        return fn
    return register


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
            check_number_range(command)
            wire = command_type(command, _KNOWN, WIRE_TYPES)
            spec = SPECS.get(wire)
            if spec is None:
                raise errors.unsupported_command(wire)
            args = spec.decode(command)
            return Outcome(envelope=HANDLERS[wire](self, args))
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
        self._errors += 1
        return Outcome(error=exc.status(f"err_local_{self._instance}_{self._errors:06d}"))

    # -- scope --------------------------------------------------------------------

    def branch(self, name: str | None, *, source: bool = False) -> Branch:
        name = self.session_branch if name is None else name
        check_branch_name(name)
        b = self.store.branch(name)
        if b is None:
            raise errors.branch_missing(name, source=source)
        return b

    def scope(self, args: dict) -> tuple[Branch, str]:
        # The engine checks both names before it looks the branch up.
        name = self.session_branch if args.get("branch") is None else args["branch"]
        check_branch_name(name)
        space = check_space(args.get("space"))
        return self.branch(name), space

    def read_view(self, b: Branch, args: dict) -> View:
        """The view a read sees: the head, or the state after the commit ``as_of`` names."""
        as_of, as_of_time = args.get("as_of"), args.get("as_of_time")
        if as_of is not None and as_of_time is not None:
            raise StrataError(
                "invalid_argument.executor.as_of_conflict",
                "as_of and as_of_time are mutually exclusive: pass a commit timestamp or a wall-clock "
                "instant, not both")
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
        if as_of == 0:
            raise errors.history("timestamp is before retained timeline history")
        if as_of > self.store.latest(b.id):
            raise errors.history("timestamp is after latest retained timeline history")
        return self.store.view(b, as_of)

    def receipt(self, tx, puts: int, deletes: int = 0) -> dict:
        return {"version": tx.version, "timestamp": tx.version, "committed_at": tx.committed_at,
                "durability": self.durability, "put_count": puts, "delete_count": deletes}


def _brief(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc).split(":")[0]


def check_branch_name(name: str) -> None:
    if name == "":
        raise StrataError("invalid_argument.engine.branch_name", "branch name must not be empty")
    if name.startswith("_"):
        raise StrataError("invalid_argument.engine.branch_name_reserved",
                          "branch name is reserved for engine control data")


def check_space(space: str | None) -> str:
    if space is None:
        return DEFAULT_SPACE
    if space == "":
        raise StrataError("invalid_argument.engine.product_space", "product space must not be empty")
    if space.startswith("_"):
        raise StrataError("invalid_argument.engine.product_space_reserved",
                          "product space is reserved for engine control data")
    return space


# -- admin, branches, spaces ---------------------------------------------------------------


@handler("ping")
def ping(e: Engine, a: dict) -> dict:
    return {"type": "pong", "data": {"version": __version__}}


def branch_id(b: Branch) -> str:
    if b.name == DEFAULT_BRANCH and b.parent is None and b.created_at is None:
        return NIL_UUID
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, b.name))


def branch_json(e: Engine, b: Branch) -> dict:
    parent = None
    if b.parent is not None:
        p = e.store.branch_by_id(b.parent)
        parent = {"name": p.name, "branch_id": branch_id(p), "generation": p.generation,
                  "fork_version": b.fork_version, "fork_timestamp": b.fork_timestamp}
    return {"name": b.name, "branch_id": branch_id(b), "generation": b.generation, "status": b.status,
            "parent": parent, "created_at": b.created_at, "deleted_at": b.deleted_at,
            "state_revision": b.state_revision}


@handler("branch_list")
def branch_list(e: Engine, a: dict) -> dict:
    return {"type": "branches", "data": page([branch_json(e, b) for b in e.store.active_branches()], False, None)}


@handler("branch_get")
def branch_get(e: Engine, a: dict) -> dict:
    return {"type": "branch", "data": branch_json(e, e.branch(a["branch"]))}


def _new_branch_name(e: Engine, name: str) -> None:
    check_branch_name(name)
    if e.store.branch(name) is not None:
        raise StrataError("already_exists.engine.branch", f"branch `{name}` already exists")


@handler("branch_create")
def branch_create(e: Engine, a: dict) -> dict:
    _new_branch_name(e, a["branch"])
    return _fork(e, a, None, None)


def _fork(e: Engine, a: dict, source: Branch, version: int, stamp: int | None = None) -> dict:
    return {"type": "branch", "data": branch_json(e, e.store.create_branch(a["branch"], source, version, stamp))}


def _refused_anchor(e: Engine, reason: str) -> StrataError:
    # The real engine spends versions on a fork it then refuses for its anchor.
    e.store.burn_versions(FAILED_FORK_VERSIONS)
    return errors.history(reason)


@handler("branch_fork_current")
def branch_fork_current(e: Engine, a: dict) -> dict:
    _new_branch_name(e, a["branch"])
    source = e.branch(a["source"], source=True)
    return _fork(e, a, source, e.store.latest(source.id))


@handler("branch_fork_at_version")
def branch_fork_at_version(e: Engine, a: dict) -> dict:
    _new_branch_name(e, a["branch"])
    source = e.branch(a["source"], source=True)
    version = a["version"]
    if version == 0 or version > e.store.latest(source.id):
        raise _refused_anchor(e, "commit version is outside retained branch history")
    if not e.store.in_timeline(source, version):
        raise _refused_anchor(e, "commit version is outside retained timeline history")
    return _fork(e, a, source, version)


@handler("branch_fork_at_timestamp")
def branch_fork_at_timestamp(e: Engine, a: dict) -> dict:
    _new_branch_name(e, a["branch"])
    source = e.branch(a["source"], source=True)
    stamp = a["timestamp"]
    if stamp > e.store.latest(source.id):
        raise _refused_anchor(e, "timestamp is newer than retained timeline history")
    version = e.store.timeline_version_at(source, stamp, by_time=False) if stamp else None
    if version is None:
        raise _refused_anchor(e, "timestamp is outside retained timeline history")
    return _fork(e, a, source, version, stamp)


@handler("branch_delete")
def branch_delete(e: Engine, a: dict) -> dict:
    b = e.branch(a["branch"])
    if b.name == DEFAULT_BRANCH:
        raise StrataError("invalid_argument.engine.branch_delete", "default branch cannot be deleted")
    own_writes = e.store.latest(b.id) > (b.created_at or 0) + 1
    gone = e.store.delete_branch(b, state_revision=3 if own_writes else 2)
    gone_kept = e.store.has_forks(b)
    for cache in e.caches.values():
        for key in [k for k in cache if k[0] == b.id]:
            del cache[key]
    return {"type": "branch_delete_result", "data": {
        "deleted": True, "effect": dict(EFFECT_DELETED), "branch": branch_json(e, gone),
        "generation_before": b.generation, "generation_after": b.generation,
        # What the deletion freed in this store: the branch's rows, unless a
        # fork of it still reads through to them.
        "cleanup": {"removed_refs": 1, "releasable_tables": int(not gone_kept),
                    "protected_tables": int(gone_kept)}}}


@handler("space_list")
def space_list(e: Engine, a: dict) -> dict:
    b = e.branch(a.get("branch"))
    return {"type": "space_list", "data": page(e.store.spaces(e.store.view(b)), False, None)}


@handler("space_exists")
def space_exists(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    return {"type": "bool", "data": e.store.space_known(e.store.view(b), space)}


@handler("space_create")
def space_create(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    if e.store.space_known(view, space):
        return {"type": "space_create_result", "data": {"space": space, "effect": dict(EFFECT_UNCHANGED)}}
    with e.store.commit(b) as tx:
        tx.register_space(view, space)
    return {"type": "space_create_result",
            "data": {"space": space, "effect": dict(EFFECT_CREATED), "commit": e.receipt(tx, 1)}}


def register_families() -> None:
    # The family modules register their handlers on import.
    from . import strata_events, strata_graph, strata_json, strata_kv, strata_vectors  # noqa: F401


register_families()
