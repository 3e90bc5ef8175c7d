"""Strata admin commands: ``info``, ``health``, ``metrics``, ``storage``, ``describe``, ``config_get``.

They describe this database the way the engine describes its own: what it is
(durable folder or in-memory cache), its branches and spaces, what the
requested branch and space hold, and the storage footprint of a durable
database (SQLite's file and write-ahead log here, where the engine reports
its own tables and log).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .store import DEFAULT_BRANCH, JSON, KV

from .commands import HANDLERS, check_branch_name, handler
from .errors import StrataError

if TYPE_CHECKING:
    from .engine import Engine

# The engine reports the semver of the Strata surface it speaks.
STRATA_VERSION = "1.2.7"
# The engine budgets a quarter of the host's available memory.
_BUDGET_SHARE = 4
CAPABILITIES = {"kv": True, "json": True, "event": True, "vector": True, "vector_index": True,
                "graph_core": True, "arrow": False, "inference": False}


def _target(e: Engine) -> str:
    return "durable_local" if e.store.durable else "cache"


def _config(e: Engine) -> dict:
    return {"target": _target(e), "created": e.store.created, "durable": e.store.durable, "default_branch": DEFAULT_BRANCH}


def _available_memory() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 0


def _counts(e: Engine, a: dict) -> tuple[int, int]:
    b = e.branch(a.get("branch"))
    return len(e.store.active_branches()), len(e.store.spaces(e.store.view(b)))


@handler("info")
def info(e: Engine, a: dict) -> dict:
    branches, spaces = _counts(e, a)
    usable = _available_memory()
    return {"type": "database_info", "data": {
        "version": STRATA_VERSION, **{k: v for k, v in _config(e).items() if k != "default_branch"},
        "default_branch": DEFAULT_BRANCH, "branch_count": branches, "space_count": spaces,
        "memory_budget": {"total_bytes": usable // _BUDGET_SHARE, "source": "derived_from_host",
                          "usable_host_bytes": usable},
        "open": True}}


@handler("health")
def health(e: Engine, a: dict) -> dict:
    # A bad name is refused, but a missing (or deleted) branch is a finding of
    # the report, not an error: the engine finds no space catalog for it.
    name = e.session_branch if a.get("branch") is None else a["branch"]
    check_branch_name(name)
    ok = "healthy"
    spaces = ok if e.store.branch(name) is not None else "missing"
    return {"type": "health", "data": {
        "status": ok if spaces == ok else "unhealthy", "identity": ok, "registry": ok, "branch_catalog": ok,
        "space_catalog": spaces, "default_branch": DEFAULT_BRANCH, "branch_count": len(e.store.active_branches())}}


@handler("metrics")
def metrics(e: Engine, a: dict) -> dict:
    branches, spaces = _counts(e, a)
    return {"type": "metrics", "data": {"target": _target(e), "durable": e.store.durable, "open": True,
                                        "branch_count": branches, "space_count": spaces,
                                        "control_status": "healthy"}}


@handler("config_get")
def config_get(e: Engine, a: dict) -> dict:
    return {"type": "config", "data": _config(e)}


@handler("describe")
def describe(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    scope = {"branch": b.name, "space": space}
    collections = HANDLERS["vector_list_collections"](e, dict(scope))["data"]["items"]
    graphs = []
    for name in HANDLERS["graph_list"](e, {**scope, "cursor": None, "limit": None})["data"]["items"]:
        meta = HANDLERS["graph_get_meta"](e, {**scope, "graph": name})["data"]
        graphs.append({"name": name, "node_count": meta["node_count"], "edge_count": meta["edge_count"]})
    last = e.store.last_event(view, space)
    return {"type": "described", "data": {
        "version": STRATA_VERSION, "target": _target(e), "default_branch": DEFAULT_BRANCH, "branch": b.name,
        "branches": [x.name for x in e.store.active_branches()], "spaces": e.store.spaces(view),
        "primitives": {"kv_count": e.store.count(view, space, KV), "json_count": e.store.count(view, space, JSON),
                       "event_count": 0 if last is None else last.sequence + 1,
                       "vector_collections": collections, "graphs": graphs},
        "config": _config(e), "capabilities": CAPABILITIES}}


@handler("storage")
def storage(e: Engine, a: dict) -> dict:
    e.branch(a.get("branch"))
    if not e.store.durable:
        raise StrataError("unsupported.engine.persistence_capability",
                          "the storage footprint needs a durable database; a cache database holds no durable objects")
    pages, page_size, free = e.store.file_pages()
    wal = e.store.wal_bytes()
    live_bytes = (pages - free) * page_size
    data = {"audit": bool(a.get("audit")), "live_table_objects": e.store.row_count(), "live_table_bytes": live_bytes,
            "wal_retained_bytes": wal, "wal_active_bytes": wal, "wal_retained_segments": 1 if wal else 0,
            "wal_retention_watermark": e.store.opened_head}
    if a.get("audit"):
        data.update({"unreferenced_objects": 0, "unreferenced_bytes": 0, "quarantined_objects": 0,
                     "quarantined_bytes": 0, "snapshot_objects": 0, "snapshot_bytes": 0,
                     "superseded_snapshots": 0, "superseded_snapshot_bytes": 0,
                     "timeline_segment_objects": 0, "timeline_segment_bytes": 0,
                     "superseded_timeline_segments": 0, "superseded_timeline_segment_bytes": 0,
                     "wal_reclaimable_bytes": 0, "wal_tail_bytes": wal,
                     "total_bytes": pages * page_size + wal})
    nothing = {"outcome": "nothing", "bytes_reclaimed": 0, "objects_affected": 0, "state_changes": 0}
    # The engine's background passes add their reports as they run: a mark and a sweep pass
    # from the second open of a database on.  This store has no such passes and reports the
    # shape they settle into, each pass having reclaimed nothing.
    passes = () if e.store.created else ("last_mark", "last_sweep")
    data["reclaim"] = {**{name: dict(nothing) for name in passes},
                       "last_snapshot_prune": dict(nothing),
                       "total_passes": 0, "total_bytes_reclaimed": 0, "reclaimed_passes": 0,
                       "deferred_passes": 0, "pending_reclaim_tasks": 0}
    return {"type": "storage", "data": data}
