"""Strata graphs: nodes with properties, typed weighted edges, neighbour pages.

An edge is stored twice, under its source (outgoing) and under its
destination (incoming), so both directions are ordered range reads.  A
neighbour page lists incoming edges before outgoing ones, each by edge type
then neighbour id; its cursor is ``<i|o> US edge_type US neighbour US dst``
(US is the unit separator, U+001F).  Removing a node removes its edges in the same
commit.  The graph record carries the node and edge counts, so a read at any
version sees the counts of that version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from .store import (
    GRAPH, GRAPH_IN, GRAPH_NODE, GRAPH_ONTOLOGY, GRAPH_OUT, View, prefix_end, split_tuple_key, tuple_key,
)

from .commands import (
    EFFECT_CREATED, EFFECT_DELETED, EFFECT_NOT_FOUND, canonical, check_encoded, effect, found, handler, name_page, page, take,
)
from . import names
from .errors import StrataError
from .names import check_name
from .ontology_rules import check_binding, check_edge_against, check_node_against, check_type_name, load_ontology

if TYPE_CHECKING:
    from .engine import Engine

DEFAULT_LIMIT = 100
SEP = "\x1f"


@dataclass(slots=True)
class Graph:
    name: str
    nodes: int
    edges: int
    created: int
    updated: int

    def aux(self) -> str:
        return json.dumps({"nodes": self.nodes, "edges": self.edges, "created": self.created})

    def info(self) -> dict:
        return {"graph": self.name, "node_count": self.nodes, "edge_count": self.edges,
                "created_version": self.created, "created_timestamp": self.created,
                "updated_version": self.updated, "updated_timestamp": self.updated, "import_pending": False}


def check_graph_name(name: str) -> None:
    check_name(names.GRAPH_NAME, name)


def check_node_id(node_id: str) -> None:
    check_name(names.NODE_ID, node_id)


def check_edge_type(edge_type: str) -> None:
    check_name(names.EDGE_TYPE, edge_type)


def check_properties(properties: Any) -> Any:
    if properties is not None and not isinstance(properties, dict):
        raise StrataError("invalid_argument.engine.graph_properties", "graph properties must be a JSON object")
    if properties is None:
        return None
    return json.loads(check_encoded("invalid_argument.engine.graph_properties_too_large", "graph properties",
                                    canonical(properties)))


def load_graph(e: Engine, view: View, space: str, name: str) -> Graph | None:
    # Every command that names a graph, read or write, refuses a bad name before looking it up.
    check_graph_name(name)
    entry = e.store.live(view, space, GRAPH, name.encode("utf-8"))
    if entry is None:
        return None
    meta = json.loads(entry.aux)
    return Graph(name, meta["nodes"], meta["edges"], meta["created"], entry.version)


def require_graph(e: Engine, view: View, space: str, name: str) -> Graph:
    g = load_graph(e, view, space, name)
    if g is None:
        raise StrataError("not_found.engine.graph", "graph does not exist")
    return g


@dataclass(slots=True)
class Node:
    node_id: str
    properties: Any
    version: int
    object_type: str | None = None
    binding: dict | None = None

    def json(self, graph: str) -> dict:
        out: dict = {"graph": graph, "node_id": self.node_id}
        if self.properties is not None:
            out["properties"] = self.properties
        if self.binding is not None:
            out["binding"] = self.binding
        if self.object_type is not None:
            out["object_type"] = self.object_type
        out.update(version=self.version, timestamp=self.version)
        return out


def node_aux(properties: Any, object_type: str | None = None, binding: dict | None = None) -> str | None:
    """A node row's aux: its properties object, or ``[properties, object_type, binding]`` when typed or bound.

    Properties are always an object (or absent), so a list marks the typed form
    and rows written before types existed read unchanged.
    """
    if object_type is None and binding is None:
        return None if properties is None else json.dumps(properties)
    return json.dumps([properties, object_type, binding])


def node_from(node_id: str, aux: str | None, version: int) -> Node:
    if not aux:
        return Node(node_id, None, version)
    raw = json.loads(aux)
    if isinstance(raw, list):
        return Node(node_id, raw[0], version, raw[1], raw[2])
    return Node(node_id, raw, version)


@dataclass(slots=True)
class Edge:
    src: str
    edge_type: str
    dst: str
    weight: float
    properties: Any
    version: int

    def json(self, graph: str) -> dict:
        out: dict = {"graph": graph, "src": self.src, "edge_type": self.edge_type, "dst": self.dst,
                     "weight": self.weight}
        if self.properties is not None:
            out["properties"] = self.properties
        out.update(version=self.version, timestamp=self.version)
        return out


def load_node(e: Engine, view: View, space: str, graph: str, node_id: str) -> Node | None:
    entry = e.store.live(view, space, GRAPH_NODE, tuple_key(graph, node_id))
    if entry is None:
        return None
    return node_from(node_id, entry.aux, entry.version)


def _edge_from(aux: str, src: str, edge_type: str, dst: str, version: int) -> Edge:
    extra = json.loads(aux)
    return Edge(src, edge_type, dst, extra["w"], extra.get("p"), version)


def load_edge(e: Engine, view: View, space: str, graph: str, src: str, edge_type: str, dst: str) -> Edge | None:
    entry = e.store.live(view, space, GRAPH_OUT, tuple_key(graph, src, edge_type, dst))
    if entry is None:
        return None
    return _edge_from(entry.aux, src, edge_type, dst, entry.version)


def edges_of(e: Engine, view: View, space: str, graph: str, node_id: str, kind: int,
             edge_type: str | None = None, after: tuple[str, str] | None = None) -> Iterator[Edge]:
    """Edges at ``node_id`` (GRAPH_OUT: it is the source; GRAPH_IN: the destination), ordered."""
    prefix = tuple_key(graph, node_id) if edge_type is None else tuple_key(graph, node_id, edge_type)
    start, strict = prefix, False
    if after is not None and tuple_key(graph, node_id, *after) >= prefix:
        start, strict = tuple_key(graph, node_id, *after), True
    for entry in e.store.scan(view, space, kind, start, prefix_end(prefix), after=strict):
        _, here, etype, other = split_tuple_key(entry.key)
        src, dst = (here, other) if kind == GRAPH_OUT else (other, here)
        yield _edge_from(entry.aux, src, etype, dst, entry.version)


def _write_edge(tx, space: str, graph: str, edge: Edge) -> None:
    aux = json.dumps({"w": edge.weight} if edge.properties is None else {"w": edge.weight, "p": edge.properties})
    tx.put(space, GRAPH_OUT, tuple_key(graph, edge.src, edge.edge_type, edge.dst), b"", aux)
    tx.put(space, GRAPH_IN, tuple_key(graph, edge.dst, edge.edge_type, edge.src), b"", aux)


def _drop_edge(tx, space: str, graph: str, src: str, edge_type: str, dst: str) -> None:
    tx.delete(space, GRAPH_OUT, tuple_key(graph, src, edge_type, dst))
    tx.delete(space, GRAPH_IN, tuple_key(graph, dst, edge_type, src))


def _save_graph(tx, space: str, g: Graph) -> None:
    tx.put(space, GRAPH, g.name.encode("utf-8"), b"", g.aux())


# -- commands -----------------------------------------------------------------------------------


@handler("graph_create")
def graph_create(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    check_graph_name(a["graph"])
    view = e.store.view(b)
    if load_graph(e, view, space, a["graph"]) is not None:
        raise StrataError("already_exists.engine.graph", "graph already exists")
    with e.store.commit(b) as tx:
        tx.register_space(view, space)
        g = Graph(a["graph"], 0, 0, tx.version, tx.version)
        _save_graph(tx, space, g)
    return {"type": "graph_create_result",
            "data": {"info": g.info(), "effect": dict(EFFECT_CREATED), "commit": e.receipt(tx, 1)}}


@handler("graph_delete")
def graph_delete(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    g = load_graph(e, view, space, a["graph"])
    if g is None:
        return {"type": "graph_delete_result", "data": {"graph": a["graph"], "effect": dict(EFFECT_NOT_FOUND)}}
    if g.nodes and not a.get("force"):
        raise StrataError("failed_precondition.engine.graph_not_empty",
                          f"graph `{g.name}` contains visible data; retry with force=true to delete it")
    prefix = tuple_key(g.name)
    with e.store.commit(b) as tx:
        for kind in (GRAPH_NODE, GRAPH_OUT, GRAPH_IN):
            for entry in list(e.store.scan(view, space, kind, prefix, prefix_end(prefix), batch=4096)):
                tx.delete(space, kind, entry.key)
        tx.delete(space, GRAPH, g.name.encode("utf-8"))
        # The ontology record goes with its graph, and counts as one more deletion.
        has_ontology = load_ontology(e, view, space, g.name) is not None
        if has_ontology:
            tx.delete(space, GRAPH_ONTOLOGY, g.name.encode("utf-8"))
    return {"type": "graph_delete_result", "data": {
        "graph": g.name, "effect": dict(EFFECT_DELETED),
        "commit": e.receipt(tx, 0, g.nodes + g.edges + 1 + has_ontology)}}


@handler("graph_list")
def graph_list(e: Engine, a: dict) -> dict:
    # What names the rows it lists comes before the scope, as the engine checks it.
    cursor = a.get("cursor")
    if cursor is not None:
        check_graph_name(cursor)  # a cursor is a graph name, held to the same rules
    b, space = e.scope(a)
    view = e.read_view(b, a)
    names = e.store.scan(view, space, GRAPH, (cursor or "").encode("utf-8"), after=cursor is not None)
    return name_page("graph_name_page", names, a.get("limit"))


@handler("graph_get_meta")
def graph_get_meta(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    return {"type": "graph_info_result", "data": require_graph(e, e.read_view(b, a), space, a["graph"]).info()}


@handler("graph_add_node")
def graph_add_node(e: Engine, a: dict) -> dict:
    checked = []

    def checks():
        check_node_id(a["node_id"])
        if a.get("object_type") is not None:
            check_type_name(a["object_type"])
        checked.append(check_properties(a.get("properties")))
    b, space = e.scope(a, checks)
    properties = checked[0]
    binding = check_binding(a.get("binding"), b)
    view = e.store.view(b)
    g = require_graph(e, view, space, a["graph"])
    check_node_against(load_ontology(e, view, space, g.name), a.get("object_type"), properties)
    created = load_node(e, view, space, g.name, a["node_id"]) is None
    with e.store.commit(b) as tx:
        tx.put(space, GRAPH_NODE, tuple_key(g.name, a["node_id"]), b"",
               node_aux(properties, a.get("object_type"), binding))
        g.nodes += created
        _save_graph(tx, space, g)
    return {"type": "graph_node_write_result", "data": {
        "graph": g.name, "node_id": a["node_id"], "effect": effect(created), "commit": e.receipt(tx, 1)}}


@handler("graph_get_node")
def graph_get_node(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    check_node_id(a["node_id"])
    view = e.read_view(b, a)
    g = require_graph(e, view, space, a["graph"])
    node = load_node(e, view, space, g.name, a["node_id"])
    return found("graph_node_result", node and node.json(g.name))


@handler("graph_remove_node")
def graph_remove_node(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    check_node_id(a["node_id"])
    view = e.store.view(b)
    g = require_graph(e, view, space, a["graph"])
    base = {"graph": g.name, "node_id": a["node_id"]}
    if load_node(e, view, space, g.name, a["node_id"]) is None:
        return {"type": "graph_delete_result", "data": {**base, "effect": dict(EFFECT_NOT_FOUND)}}
    edges = {(x.src, x.edge_type, x.dst) for kind in (GRAPH_OUT, GRAPH_IN)
             for x in edges_of(e, view, space, g.name, a["node_id"], kind)}
    with e.store.commit(b) as tx:
        for src, etype, dst in sorted(edges):
            _drop_edge(tx, space, g.name, src, etype, dst)
        tx.delete(space, GRAPH_NODE, tuple_key(g.name, a["node_id"]))
        g.nodes -= 1
        g.edges -= len(edges)
        _save_graph(tx, space, g)
    return {"type": "graph_delete_result",
            "data": {**base, "effect": dict(EFFECT_DELETED), "commit": e.receipt(tx, 0, 1 + len(edges))}}


@handler("graph_add_edge")
def graph_add_edge(e: Engine, a: dict) -> dict:
    checked = []
    b, space = e.scope(a, lambda: (_check_edge_ids(a), checked.append(check_properties(a.get("properties")))))
    properties = checked[0]
    view = e.store.view(b)
    g = require_graph(e, view, space, a["graph"])
    src, dst = load_node(e, view, space, g.name, a["src"]), load_node(e, view, space, g.name, a["dst"])
    if src is None or dst is None:
        raise StrataError("invalid_argument.engine.graph_edge_endpoint",
                          "graph edge endpoints must exist before an edge can be written")
    check_edge_against(load_ontology(e, view, space, g.name), a["edge_type"], src.object_type, dst.object_type)
    created = load_edge(e, view, space, g.name, a["src"], a["edge_type"], a["dst"]) is None
    weight = 1.0 if a.get("weight") is None else a["weight"]
    with e.store.commit(b) as tx:
        _write_edge(tx, space, g.name, Edge(a["src"], a["edge_type"], a["dst"], weight, properties, tx.version))
        g.edges += created
        _save_graph(tx, space, g)
    return {"type": "graph_edge_write_result", "data": {
        "graph": g.name, "src": a["src"], "edge_type": a["edge_type"], "dst": a["dst"],
        "effect": effect(created), "commit": e.receipt(tx, 1)}}


def _check_edge_ids(a: dict) -> None:
    check_node_id(a["src"])
    check_edge_type(a["edge_type"])
    check_node_id(a["dst"])


@handler("graph_get_edge")
def graph_get_edge(e: Engine, a: dict) -> dict:
    # The graph's name and the edge's ids come before the scope, as the engine checks them.
    check_graph_name(a["graph"])
    _check_edge_ids(a)
    b, space = e.scope(a)
    view = e.read_view(b, a)
    g = require_graph(e, view, space, a["graph"])
    edge = load_edge(e, view, space, g.name, a["src"], a["edge_type"], a["dst"])
    return found("graph_edge_result", edge and edge.json(g.name))


@handler("graph_remove_edge")
def graph_remove_edge(e: Engine, a: dict) -> dict:
    check_graph_name(a["graph"])
    _check_edge_ids(a)
    b, space = e.scope(a)
    view = e.store.view(b)
    g = require_graph(e, view, space, a["graph"])
    base = {"graph": g.name, "src": a["src"], "edge_type": a["edge_type"], "dst": a["dst"]}
    if load_edge(e, view, space, g.name, a["src"], a["edge_type"], a["dst"]) is None:
        return {"type": "graph_delete_result", "data": {**base, "effect": dict(EFFECT_NOT_FOUND)}}
    with e.store.commit(b) as tx:
        _drop_edge(tx, space, g.name, a["src"], a["edge_type"], a["dst"])
        g.edges -= 1
        _save_graph(tx, space, g)
    return {"type": "graph_delete_result",
            "data": {**base, "effect": dict(EFFECT_DELETED), "commit": e.receipt(tx, 0, 1)}}


def _parse_cursor(cursor: str) -> tuple[str, str, str, str]:
    parts = cursor.split(SEP)
    if len(parts) != 4 or parts[0] not in ("i", "o"):
        raise StrataError("invalid_argument.engine.graph_cursor",
                          "graph neighbor cursor does not have the four components this listing produces")
    return parts[0], parts[1], parts[2], parts[3]


@handler("graph_neighbors")
def graph_neighbors(e: Engine, a: dict) -> dict:
    # What names the rows it lists comes before the scope, as the engine checks it.
    check_graph_name(a["graph"])
    check_node_id(a["node_id"])
    if a.get("edge_type") is not None:
        check_edge_type(a["edge_type"])
    b, space = e.scope(a)
    view = e.read_view(b, a)
    g = require_graph(e, view, space, a["graph"])
    node_id = a["node_id"]
    limit = DEFAULT_LIMIT if a.get("limit") is None else a["limit"]
    directions = {"incoming": ("i",), "outgoing": ("o",), "both": ("i", "o")}[a["direction"]]
    resume = _parse_cursor(a["cursor"]) if a.get("cursor") is not None else None

    def walk() -> Iterator[tuple[str, Edge]]:
        for d in directions:
            after = None
            if resume is not None:
                if (d, resume[0]) == ("i", "o"):
                    continue  # the cursor is past every incoming edge
                if d == resume[0]:
                    after = (resume[1], resume[2])  # (edge type, neighbour)
            kind = GRAPH_IN if d == "i" else GRAPH_OUT
            for edge in edges_of(e, view, space, g.name, node_id, kind, a.get("edge_type"), after):
                yield d, edge

    items, has_more = take(walk(), limit)
    last, out = None, []
    for d, edge in items:
        neighbour = edge.src if d == "i" else edge.dst
        node = load_node(e, view, space, g.name, neighbour)
        out.append({"graph": g.name, "node_id": node.node_id, "src": edge.src, "edge_type": edge.edge_type,
                    "dst": edge.dst, "direction": "incoming" if d == "i" else "outgoing",
                    "node": node.json(g.name), "edge": edge.json(g.name)})
        last = SEP.join((d, edge.edge_type, neighbour, edge.dst))
    return {"type": "graph_neighbor_page", "data": page(out, has_more, last if has_more else None)}


def _nodes(e: Engine, view: View, space: str, graph: str, start: str = "", after: bool = False,
           prefix: str | None = None) -> Iterator[Node]:
    low = tuple_key(graph, start) if start else tuple_key(graph)
    high = prefix_end(tuple_key(graph) + prefix.encode("utf-8") if prefix else tuple_key(graph))
    for entry in e.store.scan(view, space, GRAPH_NODE, low, high, after=after and bool(start)):
        node_id = split_tuple_key(entry.key)[1]
        if prefix and not node_id.startswith(prefix):
            continue
        yield node_from(node_id, entry.aux, entry.version)


@handler("graph_list_nodes")
def graph_list_nodes(e: Engine, a: dict) -> dict:
    # What names the rows it lists comes before the scope, as the engine checks it.
    check_graph_name(a["graph"])
    if a.get("prefix") == "":
        check_node_id("")
    if a.get("cursor") is not None:
        check_node_id(a["cursor"])
    b, space = e.scope(a)
    view = e.read_view(b, a)
    g = require_graph(e, view, space, a["graph"])
    limit = DEFAULT_LIMIT if a.get("limit") is None else a["limit"]
    cursor = a.get("cursor")
    # An id that starts with the cursor sorts after it: resume strictly past the cursor's own key.
    nodes = (n for n in _nodes(e, view, space, g.name, cursor or "", True, a.get("prefix"))
             if cursor is None or n.node_id > cursor)
    items, has_more = take(nodes, limit)
    return {"type": "graph_node_page", "data": page(
        [n.json(g.name) for n in items], has_more, items[-1].node_id if has_more else None)}


SAMPLE_COUNT = 10


@handler("graph_sample")
def graph_sample(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    g = require_graph(e, view, space, a["graph"])
    nodes = list(_nodes(e, view, space, g.name))
    count = SAMPLE_COUNT if a.get("count") is None else a["count"]
    # Evenly strided over the ordered ids: the i-th pick is at i * total // count.
    picks = nodes if count >= len(nodes) else [nodes[i * len(nodes) // count] for i in range(count)]
    return {"type": "graph_sample_result", "data": {
        "total_count": len(nodes), "items": [n.json(g.name) for n in picks], "has_more": False, "cursor": None}}
