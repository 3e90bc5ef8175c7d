"""Graph writes of many rows: ``graph_batch_write`` (atomic) and ``graph_bulk_insert`` (chunked).

A batch is validated whole before anything is written (ids, edge types,
properties, then endpoints as each operation would see them), then applied
in order to an overlay of the graph and committed as one version.  Its
receipt counts entities by where the batch leaves them: one put for every
node or edge it leaves live, one delete for every one it leaves deleted
(edges a node deletion cascades to included), however often it touched them.

A bulk insert upserts its nodes and then its edges in chunks of
``chunk_size`` rows (default 512, clamped to 1..800), one commit each, so an
edge may name a node of the same payload; every endpoint is checked before
the first chunk lands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .store import GRAPH_IN, GRAPH_NODE, GRAPH_OUT, tuple_key

from .commands import EFFECT_DELETED, EFFECT_NOT_FOUND, effect, handler
from .errors import StrataError
from .graph import (
    Edge, _drop_edge, _save_graph, _write_edge, check_edge_type, check_graph_name, check_node_id, check_properties,
    edges_of,
    load_edge, load_node, node_aux, require_graph,
)
from .ontology_rules import check_binding, check_edge_against, check_node_against, check_type_name, load_ontology

if TYPE_CHECKING:
    from .engine import Engine

BULK_CHUNK = 512
BULK_CHUNK_MAX = 800


def _typing(data: dict, b) -> None:
    """Checks a node row's object type and binding, and keeps the binding in its stored form."""
    if data.get("object_type") is not None:
        check_type_name(data["object_type"])
    data["binding"] = check_binding(data.get("binding"), b)


def _endpoint_missing(later: bool) -> StrataError:
    if later:
        return StrataError(
            "invalid_argument.engine.graph_edge_endpoint",
            "graph edge endpoints must be upserted before the edge within the same batch; a node upserted later "
            "in the batch is not yet visible \u2014 sort nodes before edges")
    return StrataError("invalid_argument.engine.graph_edge_endpoint",
                       "graph edge endpoints must exist before an edge can be written")


@handler("graph_batch_write")
def graph_batch_write(e: Engine, a: dict) -> dict:
    ops = a["operations"]
    check_graph_name(a["graph"])
    b, space = e.scope(a)
    for op in ops:
        if op["type"] in ("upsert_node", "delete_node"):
            check_node_id(op["node_id"])
            if op["type"] == "upsert_node":
                _typing(op["data"], b)
                op["properties"] = check_properties(op["data"].get("properties"))
        else:
            check_node_id(op["src"])
            check_node_id(op["dst"])
            check_edge_type(op["edge_type"])
            if op["type"] == "upsert_edge":
                op["properties"] = check_properties(op["data"].get("properties"))
    view = e.store.view(b)
    g = require_graph(e, view, space, a["graph"])
    onto = load_ontology(e, view, space, g.name)
    for op in ops:
        if op["type"] == "upsert_node":
            check_node_against(onto, op["data"].get("object_type"), op["properties"])

    # node id -> (properties, object type, binding) while live, False once deleted, as the batch leaves it
    nodes: dict[str, Any] = {}
    edges: dict[tuple[str, str, str], Edge | None] = {}

    def node_live(node_id: str) -> bool:
        if node_id in nodes:
            return nodes[node_id] is not False
        return load_node(e, view, space, g.name, node_id) is not None

    def node_type(node_id: str) -> str | None:
        if node_id in nodes:
            return nodes[node_id][1]
        return load_node(e, view, space, g.name, node_id).object_type

    def edge_live(key: tuple[str, str, str]) -> bool:
        if key in edges:
            return edges[key] is not None
        return load_edge(e, view, space, g.name, *key) is not None

    def edges_at(node_id: str) -> set[tuple[str, str, str]]:
        found = {(x.src, x.edge_type, x.dst) for kind in (GRAPH_OUT, GRAPH_IN)
                 for x in edges_of(e, view, space, g.name, node_id, kind)}
        for key, edge in edges.items():
            if node_id in (key[0], key[2]):
                (found.add if edge is not None else found.discard)(key)
        return found

    upserted_later = [set() for _ in ops]
    pending: set[str] = set()
    for i in range(len(ops) - 1, -1, -1):
        upserted_later[i] = set(pending)
        if ops[i]["type"] == "upsert_node":
            pending.add(ops[i]["node_id"])

    outcomes = []
    for i, op in enumerate(ops):
        kind = op["type"]
        if kind == "upsert_node":
            created = not node_live(op["node_id"])
            nodes[op["node_id"]] = (op["properties"], op["data"].get("object_type"), op["data"]["binding"])
            outcomes.append((kind, True, effect(created), {"created": created}))
        elif kind == "delete_node":
            if not node_live(op["node_id"]):
                outcomes.append((kind, False, dict(EFFECT_NOT_FOUND), {"deleted": False}))
                continue
            for key in edges_at(op["node_id"]):
                edges[key] = None
            nodes[op["node_id"]] = False
            outcomes.append((kind, True, dict(EFFECT_DELETED), {"deleted": True}))
        else:
            key = (op["src"], op["edge_type"], op["dst"])
            if kind == "upsert_edge":
                missing = [end for end in (op["src"], op["dst"]) if not node_live(end)]
                if missing:
                    raise _endpoint_missing(any(end in upserted_later[i] for end in missing))
                check_edge_against(onto, op["edge_type"], node_type(op["src"]), node_type(op["dst"]))
                created = not edge_live(key)
                weight = 1.0 if op["data"].get("weight") is None else op["data"]["weight"]
                edges[key] = Edge(*key, weight, op["properties"], 0)
                outcomes.append((kind, True, effect(created), {"created": created}))
            elif edge_live(key):
                edges[key] = None
                outcomes.append((kind, True, dict(EFFECT_DELETED), {"deleted": True}))
            else:
                outcomes.append((kind, False, dict(EFFECT_NOT_FOUND), {"deleted": False}))

    applied = any(o[1] for o in outcomes)
    receipt = None
    if applied:
        before_nodes = {n: load_node(e, view, space, g.name, n) is not None for n in nodes}
        before_edges = {k: load_edge(e, view, space, g.name, *k) is not None for k in edges}
        puts = sum(v is not False for v in nodes.values()) + sum(v is not None for v in edges.values())
        deletes = len(nodes) + len(edges) - puts
        with e.store.commit(b) as tx:
            tx.register_space(view, space)
            for node_id, row in nodes.items():
                key = tuple_key(g.name, node_id)
                if row is False:
                    tx.delete(space, GRAPH_NODE, key)
                else:
                    tx.put(space, GRAPH_NODE, key, b"", node_aux(*row))
            for key, edge in edges.items():
                if edge is None:
                    _drop_edge(tx, space, g.name, *key)
                else:
                    _write_edge(tx, space, g.name, edge)
            g.nodes += sum((v is not False) - before_nodes[n] for n, v in nodes.items())
            g.edges += sum((v is not None) - before_edges[k] for k, v in edges.items())
            _save_graph(tx, space, g)
        receipt = e.receipt(tx, puts, deletes)
    mixed = applied and not all(o[1] for o in outcomes)
    items = [{"index": i, "status": "ok", "applied": ok, "effect": eff, "commit": receipt if ok else None,
              "result": {"operation_index": i, "operation": kind, **extra}, "error": None}
             for i, (kind, ok, eff, extra) in enumerate(outcomes)]
    return {"type": "graph_batch_write_result", "data": {
        "graph": g.name, "mode": "atomic", "status": "partial" if mixed else "ok", "applied": applied,
        "commit": receipt, "items": items}}


@handler("graph_bulk_insert")
def graph_bulk_insert(e: Engine, a: dict) -> dict:
    check_graph_name(a["graph"])
    nodes = a.get("nodes") or []
    edges = a.get("edges") or []
    b, space = e.scope(a)
    for n in nodes:
        check_node_id(n["node_id"])
        _typing(n, b)
        n["properties"] = check_properties(n.get("properties"))
    for x in edges:
        check_node_id(x["src"])
        check_node_id(x["dst"])
        check_edge_type(x["edge_type"])
        x["properties"] = check_properties(x.get("properties"))
    view = e.store.view(b)
    g = require_graph(e, view, space, a["graph"])
    onto = load_ontology(e, view, space, g.name)
    for n in nodes:
        check_node_against(onto, n.get("object_type"), n["properties"])
    # The last row for a node id is the one its edges will see.
    incoming = {n["node_id"]: n.get("object_type") for n in nodes}
    for x in edges:
        types = []
        for end in (x["src"], x["dst"]):
            if end in incoming:
                types.append(incoming[end])
                continue
            node = load_node(e, view, space, g.name, end)
            if node is None:
                raise _endpoint_missing(False)
            types.append(node.object_type)
        check_edge_against(onto, x["edge_type"], *types)
    size = BULK_CHUNK if a.get("chunk_size") is None else min(max(a["chunk_size"], 1), BULK_CHUNK_MAX)
    commits, receipt = 0, None
    for rows, is_node in ((nodes, True), (edges, False)):
        for start in range(0, len(rows), size):
            chunk = rows[start:start + size]
            view = e.store.view(b)
            with e.store.commit(b) as tx:
                tx.register_space(view, space)
                fresh: set = set()
                for row in chunk:
                    if is_node:
                        key = tuple_key(g.name, row["node_id"])
                        if row["node_id"] not in fresh and e.store.live(view, space, GRAPH_NODE, key) is None:
                            fresh.add(row["node_id"])
                        tx.put(space, GRAPH_NODE, key, b"",
                               node_aux(row["properties"], row.get("object_type"), row["binding"]))
                    else:
                        ident = (row["src"], row["edge_type"], row["dst"])
                        if ident not in fresh and load_edge(e, view, space, g.name, *ident) is None:
                            fresh.add(ident)
                        weight = 1.0 if row.get("weight") is None else row["weight"]
                        _write_edge(tx, space, g.name, Edge(*ident, weight, row["properties"], 0))
                if is_node:
                    g.nodes += len(fresh)
                else:
                    g.edges += len(fresh)
                _save_graph(tx, space, g)
            commits += 1
            # A row written twice in one chunk is one put.
            distinct = {r["node_id"] if is_node else (r["src"], r["edge_type"], r["dst"]) for r in chunk}
            receipt = e.receipt(tx, len(distinct))
    data: dict = {"graph": g.name, "nodes_inserted": len(nodes), "edges_inserted": len(edges), "commits": commits}
    if receipt is not None:
        data["commit"] = receipt
    return {"type": "graph_bulk_insert_result", "data": data}
