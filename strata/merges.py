"""Comparing branches and promoting one into another: ``branch_diff``, ``branch_preview``, ``branch_merge``.

Every entity is named the way the engine names it in these answers: its
*identity*, the bytes of its key (a KV key, a document id) or, for entities
inside a container, the container names each as a big-endian u16 length and
the bytes (``u16 len | collection | vector key``, ``u16 len | graph | u16 len
| node``), and an event by its sequence as u64 big-endian.  Entities compare
by content, so two branches that wrote the same value agree.

A promotion is a three-way merge over KV, JSON and vectors: the *branch
point* is the fork version between a parent and its direct child (either
way round), or the source's head at the last promotion into the target
while that promotion came from the same source (the target keeps one
record).  What the source changed since that point is applied unless the
target changed the same entity to something else (a conflict: ``strict``
refuses the whole promotion, ``source_wins`` applies the source's side).
"Changed" compares what the engine compares (see :class:`Row`).  Events
and graphs are compared, never merged.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import TYPE_CHECKING

import numpy as np

from .store import (
    EVENT_LOG, GRAPH, GRAPH_NODE, GRAPH_ONTOLOGY, GRAPH_OUT, JSON, KV, MERGE, REGISTRY_SPACE, SPACE, VECTOR,
    VECTOR_COLLECTION, Branch, View, prefix_end, split_tuple_key, tuple_key,
)

from .commands import check_branch_name, dumps, handler
from .errors import StrataError, branch_missing
from .jsondocs import doc_revision

if TYPE_CHECKING:
    from .engine import Engine

COVERED = ("kv", "json", "vector")
UNSUPPORTED = ("vector_collection", "event", "graph_metadata", "graph_node", "graph_edge", "graph_ontology")
CAPABILITIES = COVERED + UNSUPPORTED
_KIND = {"kv": KV, "json": JSON, "vector": VECTOR, "vector_collection": VECTOR_COLLECTION, "graph_metadata": GRAPH,
         "graph_node": GRAPH_NODE, "graph_edge": GRAPH_OUT, "graph_ontology": GRAPH_ONTOLOGY}
# What a promotion leaves for the derived state of each capability it touched.
DERIVED = {"json": "rebuild_required", "vector": "current"}


def _seg(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">H", len(raw)) + raw


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


class Row:
    """One entity of one capability: its identity, shown content, version and stored row.

    ``token`` is what the engine compares: the content, plus for records that
    carry their own bookkeeping (a vector's revision, a document's revision
    and the write that made it) that bookkeeping, so two sides that wrote the
    same value separately still differ where the engine says they do.
    """

    __slots__ = ("identity", "content", "version", "entry", "token")

    def __init__(self, identity: bytes, content: bytes, version: int, entry=None, token=None):
        self.identity, self.content, self.version, self.entry = identity, content, version, entry
        self.token = content if token is None else token


def _vector_content(value: bytes, aux: str) -> bytes:
    extra = json.loads(aux)
    embedding = [float(x) for x in np.frombuffer(value, dtype=np.float32)]
    return dumps({"embedding": embedding, "metadata": extra.get("m")}).encode("utf-8")


def json_origin(entry) -> int:
    """The version of the write that made this document record (a promotion copies the record, origin and all)."""
    _, _, origin = (entry.aux or "").partition("@")
    return int(origin) if origin else entry.version


def _token(capability: str, content: bytes, entry) -> tuple:
    if capability == "vector":
        return content, json.loads(entry.aux)["r"]
    if capability == "json":
        return content, doc_revision(entry.aux), json_origin(entry)
    return (content,)


def rows(e: Engine, view: View, space: str, capability: str) -> dict[bytes, Row]:
    """The live entities of one capability in one space, by identity."""
    out: dict[bytes, Row] = {}
    if capability == "event":
        for ev in e.store.events(view, space, batch=4096):
            out[struct.pack(">Q", ev.sequence)] = Row(struct.pack(">Q", ev.sequence), ev.hash, ev.version)
        return out
    for entry in e.store.scan(view, space, _KIND[capability], batch=4096):
        if capability in ("kv", "json"):
            row = Row(entry.key, entry.value, entry.version, entry, _token(capability, entry.value, entry))
        elif capability == "vector":
            coll, key = split_tuple_key(entry.key)
            content = _vector_content(entry.value, entry.aux)
            row = Row(_seg(coll) + key.encode("utf-8"), content, entry.version, entry, _token(capability, content, entry))
        elif capability == "vector_collection":
            meta = json.loads(entry.aux)
            row = Row(_seg(entry.key.decode("utf-8")), f"{meta['dimension']}/{meta['metric']}".encode(),
                      meta.get("created", entry.version), entry)
        elif capability == "graph_metadata":
            meta = json.loads(entry.aux)
            # The engine's graph record names its creation version once a write has rewritten
            # it (a fresh record does not): two graphs created apart compare equal until
            # written, and a graph written back to its old counts differs from a fresh one.
            content = f"{meta['nodes']}/{meta['edges']}"
            if entry.version != meta["created"]:
                content += f"/{meta['created']}"
            row = Row(_seg(entry.key.decode("utf-8")), content.encode(), entry.version)
        else:  # graph nodes, edges (by source), ontologies
            parts = split_tuple_key(entry.key) if capability != "graph_ontology" else [entry.key.decode("utf-8")]
            row = Row(b"".join(_seg(p) for p in parts), (entry.aux or "").encode("utf-8"), entry.version)
        out[row.identity] = row
    return out


def _spaces(e: Engine, *views: View) -> list[str]:
    found = {"default"}
    for view in views:
        found.update(e.store.spaces(view))
    return sorted(found)


def _branches(e: Engine, first: str, second: str) -> tuple[Branch, Branch]:
    check_branch_name(first)
    check_branch_name(second)
    out = []
    for name in (first, second):
        b = e.store.branch(name)
        if b is None:
            raise branch_missing(name)
        out.append(b)
    return out[0], out[1]


def _differs(capability: str, left: Row, right: Row) -> bool:
    return left.token != right.token


@handler("branch_diff")
def branch_diff(e: Engine, a: dict) -> dict:
    first, second = _branches(e, a["branch_a"], a["branch_b"])
    at = a.get("at_timestamp")
    if at is None:
        va, vb = e.store.view(first), e.store.view(second)
    else:
        # Each branch must hold the instant in its own retained timeline, the first one checked first.
        va = e.view_at(first, at)
        vb = e.view_at(second, at)
    out = []
    for space in _spaces(e, va, vb):
        for capability in CAPABILITIES:
            left, right = rows(e, va, space, capability), rows(e, vb, space, capability)
            added = [{"identity": _b64(i), "version": right[i].version} for i in sorted(right.keys() - left.keys())]
            removed = [{"identity": _b64(i), "version": left[i].version} for i in sorted(left.keys() - right.keys())]
            modified = [{"identity": _b64(i), "version": right[i].version} for i in sorted(left.keys() & right.keys())
                        if _differs(capability, left[i], right[i])]
            if added or removed or modified:
                out.append({"space": space, "capability": capability, "added": added, "removed": removed,
                            "modified": modified})
    return {"type": "branch_comparison", "data": {"branch_a": first.name, "branch_b": second.name, "spaces": out}}


# -- promotion -----------------------------------------------------------------------------


def _merge_key(target: Branch) -> bytes:
    return tuple_key(target.name)


def merge_parent(e: Engine, b: Branch) -> dict | None:
    """The record of the last promotion into ``b`` (source id, name, generation, merged_at), or None."""
    if b.status != "active":
        return None
    entry = e.store.live(e.store.view(b), REGISTRY_SPACE, MERGE, _merge_key(b))
    return None if entry is None else json.loads(entry.aux)


def branch_point(e: Engine, source: Branch, target: Branch) -> int:
    if source.parent == target.id and source.id != target.id:
        point = source.fork_version
    elif target.parent == source.id and source.id != target.id:
        point = target.fork_version
    else:
        raise StrataError("invalid_argument.engine.branch_point",
                          "no branch point: the two branches are not in a direct fork lineage")
    # The engine keeps one promotion record per target (its merge parent): the branch point
    # moves to where the last promotion read the source only while that promotion was from
    # this same source; a promotion from another branch in between puts it back at the fork.
    last = merge_parent(e, target)
    if last is not None and last["source"] == source.id and "source_version" in last:
        point = last["source_version"]
    return point


def _plan(e: Engine, source: Branch, target: Branch, point: int, strategy: str) -> dict:
    vs, vt, vbase = e.store.view(source), e.store.view(target), e.store.view(source, point)
    spaces = _spaces(e, vs, vt)
    applied, deleted, conflicts, changed = [], [], [], set()
    writes: list[tuple[str, str, Row | None, Row | None]] = []  # (space, capability, source row, target row)
    for space in spaces:
        for capability in COVERED:
            src, tgt, base = (rows(e, v, space, capability) for v in (vs, vt, vbase))
            for ident in sorted(src.keys() | base.keys()):
                s, b, t = src.get(ident), base.get(ident), tgt.get(ident)
                token = (lambda r: None if r is None else r.token)
                # A side changed the entity when what the engine compares differs from the branch
                # point (a KV rewrite to the same bytes, or a change and back, is no change).
                if token(s) == token(b):
                    continue
                changed.add(capability)
                target_changed = token(t) != token(b)
                if target_changed and token(t) == token(s):
                    continue
                place = {"capability": capability, "space": space, "identity": _b64(ident)}
                if target_changed:
                    conflict = dict(place)
                    if s is not None:
                        conflict["source_value"] = _b64(s.content)
                    if t is not None:
                        conflict["target_value"] = _b64(t.content)
                    conflict["kind"] = "value_divergence" if s is not None and t is not None \
                        else "modify_delete_divergence"
                    conflict["strategy_result"] = "refused" if strategy == "strict" else "source_wins"
                    conflicts.append(conflict)
                    if strategy == "strict":
                        continue
                if s is not None:
                    applied.append({**place, "value": _b64(s.content)})
                else:
                    deleted.append(place)
                writes.append((space, capability, s, t))
    # Containers travel with a promotion too, each alone making a commit.  One the source
    # removed since the branch point (a deleted collection, or one deleted and made again; a
    # deleted space) goes on the target once the promotion leaves it empty there; a collection
    # the target lacks then (a new one, or the source's remade one) is created there; a space
    # the target lacks is registered.
    gone_collections = []
    for space in _spaces(e, vbase):
        for entry in e.store.scan(vbase, space, VECTOR_COLLECTION):
            now = e.store.live(vs, space, VECTOR_COLLECTION, entry.key)
            removed = now is None or json.loads(now.aux).get("created") != json.loads(entry.aux).get("created")
            if (removed and e.store.live(vt, space, VECTOR_COLLECTION, entry.key) is not None
                    and not _vectors_left(e, vt, space, entry.key.decode("utf-8"), writes)):
                gone_collections.append((space, entry.key))
    gone = set(gone_collections)
    collections = [(space, entry) for space in _spaces(e, vs) for entry in e.store.scan(vs, space, VECTOR_COLLECTION)
                   if (space, entry.key) in gone or e.store.live(vt, space, VECTOR_COLLECTION, entry.key) is None]
    known = set(e.store.spaces(vt))
    new_spaces = [space for space in e.store.spaces(vs) if space not in known]
    source_spaces = set(e.store.spaces(vs))
    gone_spaces = [space for space in e.store.spaces(vbase)
                   if space not in source_spaces and space in known
                   and _space_left_empty(e, vt, space, writes, gone, {space for space, _ in collections})]
    return {"spaces": spaces, "applied": applied, "deleted": deleted, "conflicts": conflicts,
            "changed": changed, "writes": writes, "collections": collections, "new_spaces": new_spaces,
            "gone_collections": [(space, key) for space, key in gone_collections
                                 if not any(s == space and c.key == key for s, c in collections)],
            "replaced_collections": gone & {(space, c.key) for space, c in collections},
            "gone_spaces": gone_spaces}


def _vectors_left(e: Engine, vt: View, space: str, coll: str, writes: list) -> bool:
    """Whether collection ``coll`` of the target still holds a vector after ``writes``."""
    prefix = tuple_key(coll)
    keys = {x.key for x in e.store.scan(vt, space, VECTOR, prefix, prefix_end(prefix), batch=4096)}
    for w_space, capability, s, t in writes:
        if w_space == space and capability == "vector":
            key = (s or t).entry.key
            if key.startswith(prefix):
                (keys.add if s is not None else keys.discard)(key)
    return bool(keys)


def _space_left_empty(e: Engine, vt: View, space: str, writes: list, gone_collections: set,
                      new_collections: set) -> bool:
    """Whether the target's ``space`` holds nothing once ``writes`` and the collection moves are done."""
    if space in new_collections or e.store.last_event(vt, space) is not None:
        return False
    rows = {(kind, x.key) for kind in e.store.kinds_in(vt, space) if kind != EVENT_LOG
            for x in e.store.scan(vt, space, kind, batch=4096)}
    rows -= {(VECTOR_COLLECTION, key) for s, key in gone_collections if s == space}
    for w_space, capability, s, t in writes:
        if w_space == space:
            row = (_KIND[capability], (s or t).entry.key)
            (rows.add if s is not None else rows.discard)(row)
    return not rows


def _derived(capabilities: set) -> list[dict]:
    return [{"capability": c, "disposition": DERIVED[c]} for c in ("json", "vector") if c in capabilities]


def _tail(plan: dict, derived: set) -> dict:
    return {"conflicts": plan["conflicts"], "spaces_covered": plan["spaces"],
            "capabilities_covered": list(COVERED), "capabilities_unsupported": list(UNSUPPORTED),
            "derived_state": _derived(derived)}


@handler("branch_preview")
def branch_preview(e: Engine, a: dict) -> dict:
    source, target = _branches(e, a["source"], a["target"])
    point = branch_point(e, source, target)
    strategy = a.get("strategy") or "strict"
    plan = _plan(e, source, target, point, strategy)
    return {"type": "branch_preview", "data": {
        "source": source.name, "target": target.name, "branch_point": point, "strategy": strategy,
        **_tail(plan, plan["changed"])}}


@handler("branch_merge")
def branch_merge(e: Engine, a: dict) -> dict:
    source, target = _branches(e, a["source"], a["target"])
    point = branch_point(e, source, target)
    strategy = a.get("strategy") or "strict"
    plan = _plan(e, source, target, point, strategy)
    if strategy == "strict" and plan["conflicts"]:
        raise StrataError("conflict.engine.promotion",
                          f"promotion of `{source.name}` into `{target.name}` refused: "
                          f"{len(plan['conflicts'])} conflict(s)")
    head: dict = {"source": source.name, "target": target.name, "branch_point": point, "strategy": strategy}
    if any(plan[k] for k in ("writes", "collections", "new_spaces", "gone_collections", "gone_spaces")):
        head.update(_apply(e, source, target, plan))
        # What the promotion covered: the source's spaces and the target's as it left them.
        plan["spaces"] = _spaces(e, e.store.view(source), e.store.view(e.store.branch(target.name)))
    touched = {w[1] for w in plan["writes"]}
    return {"type": "branch_merge", "data": {
        **head, "applied": plan["applied"], "deleted": plan["deleted"], **_tail(plan, touched)}}


def _apply(e: Engine, source: Branch, target: Branch, plan: dict) -> dict:
    writes, collections, spaces = plan["writes"], plan["collections"], plan["new_spaces"]
    vt, vs = e.store.view(target), e.store.view(source)
    source_head = e.store.latest(source.id)
    counts: dict[tuple[str, str], int] = {}  # (space, collection) -> change in live vectors
    puts: dict[tuple[str, str], int] = {}  # (space, collection) -> vectors written there
    # The engine spends a version on the promotion record before the commit that carries it.
    e.store.burn_versions(1)
    with e.store.commit(target) as tx:
        for space in dict.fromkeys([*spaces, *(w[0] for w in writes)]):
            tx.register_space(vt, space)
        for space, key in plan["gone_collections"]:
            tx.delete(space, VECTOR_COLLECTION, key)
        for space, entry in collections:
            tx.register_space(vt, space)
            meta = json.loads(entry.aux)
            meta["count"], meta["created"] = 0, tx.version
            tx.put(space, VECTOR_COLLECTION, entry.key, b"", json.dumps(meta))
        for space, capability, s, t in writes:
            kind = _KIND[capability]
            key = (s or t).entry.key
            if s is not None:
                aux = s.entry.aux
                if capability == "json":
                    aux = f"{doc_revision(aux)}@{json_origin(s.entry)}"
                tx.put(space, kind, key, s.entry.value, aux)
            elif capability == "vector":
                # The revision counter survives the deletion, as in vector_delete.
                tx.delete(space, kind, key, json.dumps({"r": json.loads(t.entry.aux)["r"]}))
            else:
                tx.delete(space, kind, key)
            if capability == "vector":
                coll = split_tuple_key(key)[0]
                counts[(space, coll)] = counts.get((space, coll), 0) + (s is not None) - (t is not None)
                puts[(space, coll)] = puts.get((space, coll), 0) + (s is not None)
        removed = set(plan["gone_collections"])
        copied = {(space, entry.key) for space, entry in collections}
        for (space, coll), delta in counts.items():
            key = coll.encode("utf-8")
            e.caches.setdefault("vectors", {}).pop((target.id, space, coll), None)
            if (space, key) in removed:
                continue
            if (space, key) in copied:  # made by this promotion, above: it holds what it puts there
                meta = json.loads(e.store.live(vs, space, VECTOR_COLLECTION, key).aux)
                meta["count"], meta["created"] = puts.get((space, coll), 0), tx.version
            else:
                record = e.store.live(vt, space, VECTOR_COLLECTION, key)
                if record is None:
                    continue
                meta = json.loads(record.aux)
                meta["count"] += delta
            tx.put(space, VECTOR_COLLECTION, key, b"", json.dumps(meta))
        for space in plan["gone_spaces"]:
            tx.delete(REGISTRY_SPACE, SPACE, space.encode("utf-8"))
        tx.put(REGISTRY_SPACE, MERGE, _merge_key(target), b"", json.dumps({
            "source": source.id, "source_name": source.name, "source_generation": source.generation,
            "merged_at": tx.version, "source_version": source_head}))
    # ... and two more after it (the engine's promotion bookkeeping): the first is on the
    # target's timeline (reads and forks can be anchored there), the second on none.
    e.store.burn_versions(1, target.id)
    e.store.burn_versions(1)
    for space in plan["gone_spaces"]:
        e.store.space_removed(target.id, space)
    # Cached vector indexes of the target are rebuilt from the rows on their next read.
    for key in [k for k in e.caches.get("vectors", {}) if k[0] == target.id]:
        del e.caches["vectors"][key]
    return {"target_version": tx.version, "target_timestamp": tx.version}

