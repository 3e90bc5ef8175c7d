"""Graph ontology commands, node-type listings and entity bindings (issue 23).

The record and the rules it enforces live in :mod:`ontology_rules`; this
module holds the commands.  Definitions replace freely while the ontology
is a draft; a freeze validates it (at least one type, every link endpoint a
declared object type) and makes it immutable.  Listings by type and by
binding read the node rows of one snapshot (the engine keeps reverse
indexes for these; here a scan of the graph's nodes answers the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from .store import GRAPH, GRAPH_IN, GRAPH_NODE, GRAPH_OUT, View, prefix_end, split_tuple_key, tuple_key

from .commands import (
    EFFECT_CREATED, EFFECT_DELETED, EFFECT_NOT_FOUND, EFFECT_UNCHANGED, EFFECT_UPDATED, check_space, handler,
    page, take,
)
from .errors import StrataError
from .graph import (
    DEFAULT_LIMIT, Node, _drop_edge, _nodes, _save_graph, check_graph_name, check_node_id, edges_of, load_graph,
    node_aux, require_graph,
)
from .ontology_rules import (
    Ontology, check_binding_target, check_cardinality, check_property_defs, check_type_name, load_ontology,
    save_ontology,
)

if TYPE_CHECKING:
    from .engine import Engine


def _ontology_write(e: Engine, a: dict, kind: str, define) -> dict:
    """Runs one change of the draft ontology: ``define(onto)`` returns whether the type existed."""
    b, space = e.scope(a)
    view = e.store.view(b)
    g = require_graph(e, view, space, a["graph"])
    onto = load_ontology(e, view, space, g.name) or Ontology()
    if onto.frozen:
        raise StrataError("failed_precondition.engine.graph_ontology_frozen",
                          "graph ontology is frozen and cannot change")
    existed = define(onto)
    base = {"graph": g.name, "kind": kind, "type_name": a["name"]}
    return {"b": b, "space": space, "g": g, "onto": onto, "existed": existed, "base": base}


def _commit(e: Engine, w: dict) -> dict:
    with e.store.commit(w["b"]) as tx:
        save_ontology(tx, w["space"], w["g"].name, w["onto"])
    return e.receipt(tx, 1)


@handler("graph_define_object_type")
def define_object_type(e: Engine, a: dict) -> dict:
    # The graph's name, then the type's, before anything else, as the engine checks them.
    check_graph_name(a["graph"])
    check_type_name(a["name"])
    defs = check_property_defs(a.get("properties"))

    def define(onto: Ontology) -> bool:
        existed = a["name"] in onto.objects
        onto.objects[a["name"]] = defs
        onto.objects = dict(sorted(onto.objects.items()))
        return existed

    w = _ontology_write(e, a, "object", define)
    receipt = _commit(e, w)
    return {"type": "graph_ontology_write_result", "data": {
        **w["base"], "effect": dict(EFFECT_UPDATED if w["existed"] else EFFECT_CREATED), "commit": receipt}}


@handler("graph_define_link_type")
def define_link_type(e: Engine, a: dict) -> dict:
    check_graph_name(a["graph"])
    for name in (a["name"], a["source"], a["target"]):
        check_type_name(name)
    check_cardinality(a.get("cardinality"))
    defs = check_property_defs(a.get("properties"))

    def define(onto: Ontology) -> bool:
        existed = a["name"] in onto.links
        onto.links[a["name"]] = {"source": a["source"], "target": a["target"],
                                 "cardinality": a.get("cardinality"), "properties": defs}
        onto.links = dict(sorted(onto.links.items()))
        return existed

    w = _ontology_write(e, a, "link", define)
    receipt = _commit(e, w)
    return {"type": "graph_ontology_write_result", "data": {
        **w["base"], "effect": dict(EFFECT_UPDATED if w["existed"] else EFFECT_CREATED), "commit": receipt}}


def _delete_type(e: Engine, a: dict, kind: str) -> dict:
    check_graph_name(a["graph"])
    check_type_name(a["name"])

    def define(onto: Ontology) -> bool:
        table = onto.objects if kind == "object" else onto.links
        return table.pop(a["name"], None) is not None

    w = _ontology_write(e, a, kind, define)
    if not w["existed"]:
        return {"type": "graph_ontology_delete_result", "data": {**w["base"], "effect": dict(EFFECT_NOT_FOUND)}}
    receipt = _commit(e, w)
    return {"type": "graph_ontology_delete_result",
            "data": {**w["base"], "effect": dict(EFFECT_DELETED), "commit": receipt}}


@handler("graph_delete_object_type")
def delete_object_type(e: Engine, a: dict) -> dict:
    return _delete_type(e, a, "object")


@handler("graph_delete_link_type")
def delete_link_type(e: Engine, a: dict) -> dict:
    return _delete_type(e, a, "link")


def _cannot_freeze(reason: str) -> StrataError:
    return StrataError("failed_precondition.engine.graph_ontology_freeze", f"ontology cannot freeze: {reason}")


@handler("graph_freeze_ontology")
def freeze_ontology(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    g = require_graph(e, view, space, a["graph"])
    onto = load_ontology(e, view, space, g.name) or Ontology()
    if onto.frozen:
        raise StrataError("failed_precondition.engine.graph_ontology_frozen",
                          "graph ontology is frozen and cannot change")
    if not onto.objects and not onto.links:
        raise _cannot_freeze("ontology declares no object or link types")
    for name, link in onto.links.items():
        for end in ("source", "target"):
            if link[end] not in onto.objects:
                raise _cannot_freeze(f"link type `{name}` {end} references undeclared object type `{link[end]}`")
    onto.status = "frozen"
    with e.store.commit(b) as tx:
        save_ontology(tx, space, g.name, onto)
    return {"type": "graph_ontology_freeze_result", "data": {
        "graph": g.name, "object_types": len(onto.objects), "link_types": len(onto.links),
        "commit": e.receipt(tx, 1)}}


def _ontology_json(onto: Ontology, graph: str, objects: list[dict], links: list[dict]) -> dict:
    out: dict = {"graph": graph, "status": onto.status}
    if objects:
        out["object_types"] = objects
    if links:
        out["link_types"] = links
    out.update(version=onto.version, timestamp=onto.version)
    return out


@handler("graph_get_ontology")
def get_ontology(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.read_view(b, a)
    g = require_graph(e, view, space, a["graph"])
    onto = load_ontology(e, view, space, g.name)
    if onto is None:
        return {"type": "graph_ontology_result", "data": None}
    return {"type": "graph_ontology_result", "data": _ontology_json(
        onto, g.name, [onto.object_json(n) for n in onto.objects], [onto.link_json(n) for n in onto.links])}


@handler("graph_ontology_summary")
def ontology_summary(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.read_view(b, a)
    g = require_graph(e, view, space, a["graph"])
    onto = load_ontology(e, view, space, g.name)
    if onto is None:
        return {"type": "graph_ontology_summary_result", "data": None}
    typed: dict[str, int] = {}
    for node in _nodes(e, view, space, g.name):
        if node.object_type is not None:
            typed[node.object_type] = typed.get(node.object_type, 0) + 1
    prefix = tuple_key(g.name)
    by_edge_type: dict[str, int] = {}
    for entry in e.store.scan(view, space, GRAPH_OUT, prefix, prefix_end(prefix), batch=4096):
        etype = split_tuple_key(entry.key)[2]
        by_edge_type[etype] = by_edge_type.get(etype, 0) + 1
    objects = [{**onto.object_json(n), "node_count": typed.get(n, 0)} for n in onto.objects]
    links = [{**onto.link_json(n), "edge_count": by_edge_type.get(n, 0)} for n in onto.links]
    return {"type": "graph_ontology_summary_result", "data": _ontology_json(onto, g.name, objects, links)}


@handler("graph_nodes_by_type")
def nodes_by_type(e: Engine, a: dict) -> dict:
    # The graph's name, the type's and the cursor come before the scope, as the engine checks them.
    check_graph_name(a["graph"])
    check_type_name(a["object_type"])
    cursor = a.get("cursor")
    if cursor is not None:
        check_node_id(cursor)
    b, space = e.scope(a)
    view = e.read_view(b, a)
    g = require_graph(e, view, space, a["graph"])
    limit = DEFAULT_LIMIT if a.get("limit") is None else a["limit"]
    nodes = (n for n in _nodes(e, view, space, g.name, cursor or "", True)
             if n.object_type == a["object_type"] and (cursor is None or n.node_id > cursor))
    items, has_more = take(nodes, limit)
    return {"type": "graph_node_page", "data": page(
        [n.json(g.name) for n in items], has_more, items[-1].node_id if has_more else None)}


# -- entity bindings ---------------------------------------------------------------------

def _bound(e: Engine, view: View, space: str, target: dict) -> Iterator[tuple[str, Node]]:
    """(graph, node) for every node of every graph in the space bound to ``target``, by graph then node id."""
    for entry in e.store.scan(view, space, GRAPH, b"", batch=4096):
        graph = entry.key.decode("utf-8")
        for node in _nodes(e, view, space, graph):
            if node.binding is not None and node.binding["target"] == target:
                yield graph, node


SEP = "\x1f"


@handler("graph_bindings_for_entity")
def bindings_for_entity(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    target = a["target"]
    check_space(target["space"])
    if target["key"] == "":
        raise StrataError("invalid_argument.engine.graph_binding", "graph binding key must not be empty")
    wanted = {"primitive": target["primitive"]}
    if target.get("branch") is not None:
        wanted["branch"] = target["branch"]
    wanted.update(space=target["space"], key=target["key"])
    view = e.read_view(b, a)
    cursor = a.get("cursor")
    limit = DEFAULT_LIMIT if a.get("limit") is None else a["limit"]
    hits = ((graph, node) for graph, node in _bound(e, view, space, wanted)
            if cursor is None or f"{graph}{SEP}{node.node_id}" > cursor)
    items, has_more = take(hits, limit)
    out = [{"graph": graph, "node_id": node.node_id, "binding": node.binding,
            "version": node.version, "timestamp": node.version} for graph, node in items]
    last = f"{items[-1][0]}{SEP}{items[-1][1].node_id}" if has_more else None
    return {"type": "graph_binding_page", "data": page(out, has_more, last)}


@handler("graph_apply_delete_policy")
def apply_delete_policy(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    target = check_binding_target(a["target"], b.name)
    policy = a["policy"]
    view = e.store.view(b)
    hits = list(_bound(e, view, space, target))
    data: dict = {"policy": policy}
    if not hits:
        return {"type": "graph_delete_policy_result",
                "data": {**data, "effect": {**EFFECT_UNCHANGED, "matched": False}}}
    if policy == "keep_dangling":
        return {"type": "graph_delete_policy_result",
                "data": {**data, "effect": {**EFFECT_UNCHANGED, "affected_count": len(hits)}}}
    graphs = {name: load_graph(e, view, space, name) for name in dict.fromkeys(g for g, _ in hits)}
    doomed: dict[str, set] = {name: set() for name in graphs}  # edges a cascade removes, each once
    if policy == "cascade":
        for graph, node in hits:
            doomed[graph] |= {(x.src, x.edge_type, x.dst) for kind in (GRAPH_OUT, GRAPH_IN)
                              for x in edges_of(e, view, space, graph, node.node_id, kind)}
    with e.store.commit(b) as tx:
        for graph, node in hits:
            key = tuple_key(graph, node.node_id)
            if policy == "detach":
                tx.put(space, GRAPH_NODE, key, b"", node_aux(node.properties, node.object_type))
            else:
                tx.delete(space, GRAPH_NODE, key)
                graphs[graph].nodes -= 1
        for graph, edges in doomed.items():
            for src, etype, dst in sorted(edges):
                _drop_edge(tx, space, graph, src, etype, dst)
            graphs[graph].edges -= len(edges)
        for g in graphs.values():
            _save_graph(tx, space, g)
    if policy == "detach":
        effect, receipt = {**EFFECT_UPDATED, "affected_count": len(hits)}, e.receipt(tx, len(hits))
    else:
        removed = len(hits) + sum(len(x) for x in doomed.values())
        effect, receipt = {**EFFECT_DELETED, "affected_count": len(hits)}, e.receipt(tx, 0, removed)
    return {"type": "graph_delete_policy_result", "data": {**data, "effect": effect, "commit": receipt}}
