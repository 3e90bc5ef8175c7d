"""Strata admin, branch and space commands: ``ping``, ``branch_*`` and ``space_*``.

A family like the others: its handlers register with
:mod:`memstrata.strata.commands` when the engine imports it.  Branches get a
stable ``branch_id`` (a UUIDv5 of the name, the nil UUID for the store's
original default branch) as the real engine reports them.  A fork the engine
refuses for its anchor still spends versions, as the real engine's does.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from .store import DEFAULT_BRANCH, DEFAULT_SPACE, EVENT_LOG, FAILED_FORK_VERSIONS, REGISTRY_SPACE, SPACE, Branch

from . import errors
from .admin import STRATA_VERSION
from .commands import (
    EFFECT_CREATED, EFFECT_DELETED, EFFECT_NOT_FOUND, EFFECT_UNCHANGED, check_branch_name, check_space, handler, page,
)
from .errors import StrataError
from .jsondocs import index_entries
from .merges import merge_parent

if TYPE_CHECKING:
    from .engine import Engine

NIL_UUID = "00000000-0000-0000-0000-000000000000"


@handler("ping")
def ping(e: Engine, a: dict) -> dict:
    # The engine version this server answers as, like `info`: an agent that checks it before
    # using a command sees the version whose behaviour it gets.
    return {"type": "pong", "data": {"version": STRATA_VERSION}}


def branch_id(b: Branch) -> str:
    if b.name == DEFAULT_BRANCH and b.parent is None and b.created_at is None:
        return NIL_UUID
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, b.name))


def branch_json(e: Engine, b: Branch, last: dict | None = None) -> dict:
    """A branch as the engine describes it; ``last`` is its merge record when the
    caller read it before the branch stopped being readable (a deletion)."""
    parent = None
    if b.parent is not None:
        p = e.store.branch_by_id(b.parent)
        parent = {"name": p.name, "branch_id": branch_id(p), "generation": p.generation,
                  "fork_version": b.fork_version, "fork_timestamp": b.fork_timestamp}
    out = {"name": b.name, "branch_id": branch_id(b), "generation": b.generation, "status": b.status,
           "parent": parent}
    last = last or merge_parent(e, b)
    if last is not None:
        source = e.store.branch_by_id(last["source"])
        out["merge_parent"] = {"source_name": last["source_name"], "source_branch_id": branch_id(source),
                               "source_generation": last["source_generation"],
                               "merged_at": last["merged_at"], "merged_timestamp": last["merged_at"]}
    out.update(created_at=b.created_at, deleted_at=b.deleted_at, state_revision=b.state_revision)
    return out


@handler("branch_list")
def branch_list(e: Engine, a: dict) -> dict:
    return {"type": "branches", "data": page([branch_json(e, b) for b in e.store.active_branches()], False, None)}


@handler("branch_get")
def branch_get(e: Engine, a: dict) -> dict:
    return {"type": "branch", "data": branch_json(e, e.branch(a["branch"]))}


def _new_branch_name(e: Engine, name: str, source: str | None = None) -> None:
    # A fork's source name is judged first, then the new name, before any branch is looked up.
    if source is not None:
        check_branch_name(source)
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
    _new_branch_name(e, a["branch"], a["source"])
    source = e.branch(a["source"], source=True)
    return _fork(e, a, source, e.store.latest(source.id))


@handler("branch_fork_at_version")
def branch_fork_at_version(e: Engine, a: dict) -> dict:
    _new_branch_name(e, a["branch"], a["source"])
    source = e.branch(a["source"], source=True)
    version = a["version"]
    # Before the lineage's first version (an empty root's creation included) or past the
    # source's newest is outside the branch; between, a version that is no commit of its
    # timeline is outside the timeline.
    if version < e.store.timeline_start(source) or version > e.store.latest(source.id):
        raise _refused_anchor(e, "commit version is outside retained branch history")
    if not e.store.in_timeline(source, version):
        raise _refused_anchor(e, "commit version is outside retained timeline history")
    return _fork(e, a, source, version)


@handler("branch_fork_at_timestamp")
def branch_fork_at_timestamp(e: Engine, a: dict) -> dict:
    _new_branch_name(e, a["branch"], a["source"])
    source = e.branch(a["source"], source=True)
    stamp = a["timestamp"]
    if stamp > e.store.latest(source.id):
        raise _refused_anchor(e, "timestamp is newer than retained timeline history")
    version = e.store.timeline_version_at(source, stamp, by_time=False, anchor=True) if stamp else None
    if version is None:
        raise _refused_anchor(e, "timestamp is outside retained timeline history")
    return _fork(e, a, source, version, stamp)


@handler("branch_delete")
def branch_delete(e: Engine, a: dict) -> dict:
    name = a["branch"]
    check_branch_name(name)
    if name == DEFAULT_BRANCH:
        raise StrataError("invalid_argument.engine.branch_delete", "default branch cannot be deleted")
    # With one branch left the engine refuses before it looks the named one up.
    if len(e.store.active_branches()) <= 1:
        raise StrataError("invalid_argument.engine.branch_delete", "delete would remove the last active branch")
    b = e.branch(name)
    # The answer describes the branch as deleted, with the last promotion into it as before.
    merged = merge_parent(e, b)
    # A deleted branch's state revision counts on from its own by the versions of its timeline,
    # as the engine's does.
    gone = e.store.delete_branch(b, state_revision=b.state_revision + e.store.timeline_commits(b))
    gone_kept = e.store.has_forks(b)
    for cache in e.caches.values():
        for key in [k for k in cache if k[0] == b.id]:
            del cache[key]
    return {"type": "branch_delete_result", "data": {
        "deleted": True, "effect": dict(EFFECT_DELETED), "branch": branch_json(e, gone, merged),
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


@handler("space_delete")
def space_delete(e: Engine, a: dict) -> dict:
    # Both names, then the default space's refusal, then the branch lookup, as the engine checks them.
    check_branch_name(e.session_branch if a.get("branch") is None else a["branch"])
    if check_space(a.get("space")) == DEFAULT_SPACE:
        raise StrataError("invalid_argument.engine.space_delete_default", "default product space cannot be deleted")
    b, space = e.scope(a)
    force = bool(a.get("force"))
    view = e.store.view(b)
    base = {"space": space, "force": force}
    if not e.store.space_known(view, space):
        return {"type": "space_delete_result", "data": {**base, "deleted_rows": 0, "effect": dict(EFFECT_NOT_FOUND)}}
    rows = [(kind, x.key) for kind in e.store.kinds_in(view, space) if kind != EVENT_LOG
            for x in e.store.scan(view, space, kind, batch=4096)]
    last = e.store.last_event(view, space)
    if (rows or last is not None) and not force:
        raise StrataError("failed_precondition.engine.space_not_empty",
                          f"product space `{space}` contains visible data; retry with force=true to delete it")
    # The engine counts two rows per event (the record and its type index) and one for the log.
    # ... and the documents' index entries.
    deleted = len(rows) + (0 if last is None else 2 * (last.sequence + 1) + 1) + index_entries(e, b, view, space)
    with e.store.commit(b) as tx:
        for kind, key in rows:
            tx.delete(space, kind, key)
        if last is not None:
            # The log restarts at 0; its old rows stay for reads as of earlier versions and for forks.
            tx.put(space, EVENT_LOG, b"", b"", str(e.store.event_base(view, space) + last.sequence + 1))
        tx.delete(REGISTRY_SPACE, SPACE, space.encode("utf-8"))
    e.store.space_removed(b.id, space)
    for cache in e.caches.values():
        for key in [k for k in cache if k[:2] == (b.id, space)]:
            del cache[key]
    return {"type": "space_delete_result", "data": {
        **base, "deleted_rows": deleted, "effect": dict(EFFECT_DELETED), "commit": e.receipt(tx, 0, deleted)}}
