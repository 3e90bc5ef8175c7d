"""Scripted and random histories for graph ontologies, node types and entity bindings (issue 23).

Run through MemStrata's server and stratadb 1.2.7 side by side by
test_ontology_commands.py.
"""

from __future__ import annotations

import random

from .graph_scenarios import bw, de, dn, ue, un
from .scenarios import cmd

K = {"primitive": "kv", "space": "default", "key": "k"}


def t(primitive="kv", space="default", key="k", **extra) -> dict:
    return {"primitive": primitive, "space": space, "key": key, **extra}


def c(**command):
    return cmd(**command)


DEFINITIONS = [
    c(type="graph_create", graph="g"),
    c(type="graph_get_ontology", graph="g"),
    c(type="graph_ontology_summary", graph="g"),
    c(type="graph_freeze_ontology", graph="g"),
    c(type="graph_delete_object_type", graph="g", name="zz"),
    c(type="graph_define_object_type", graph="g", name="person"),
    c(type="graph_define_object_type", graph="g", name="person",
      properties={"age": {"value_type": "integer", "required": True}, "name": {"value_type": "string"}}),
    c(type="graph_define_object_type", graph="g", name="company",
      properties={"z": {}, "a": {"zzz": 1}, "m": ["string", True], "n": ["json"], "o": {"value_type": None}}),
    c(type="graph_define_object_type", graph="g", name="a/b"),
    c(type="graph_define_object_type", graph="g", name="empty", properties={}),
    # Refusals: names, hints, wire shapes, a missing graph.
    c(type="graph_define_object_type", graph="g", name=""),
    c(type="graph_define_object_type", graph="g", name="_x"),
    c(type="graph_define_object_type", graph="g", name="p", properties={"": {}}),
    c(type="graph_define_object_type", graph="g", name="p", properties={"a": {"value_type": ""}}),
    c(type="graph_define_object_type", graph="g", name="p", properties=[]),
    c(type="graph_define_object_type", graph="g", name="p", properties={"a": 1}),
    c(type="graph_define_object_type", graph="g", name="p", properties={"a": {"required": None}}),
    c(type="graph_define_object_type", graph="g", name="p", properties={"a": {"value_type": 3}}),
    c(type="graph_define_object_type", graph="nope", name="p"),
    c(type="graph_define_object_type", graph="nope", name=""),
    c(type="graph_define_object_type", graph="g", name="p", zzz=1),
    c(type="graph_define_object_type", graph="g"),
    c(type="graph_define_link_type", graph="g", name="works_at", source="person", target="company"),
    c(type="graph_define_link_type", graph="g", name="knows", source="person", target="person",
      cardinality="many-to-many", properties={"since": {"value_type": "integer"}}),
    c(type="graph_define_link_type", graph="g", name="knows", source="person", target="person",
      cardinality="one-to-one"),
    c(type="graph_define_link_type", graph="g", name="dangling", source="ghost", target="person"),
    c(type="graph_define_link_type", graph="g", name="x", source="a", target="b", cardinality="weird"),
    c(type="graph_define_link_type", graph="g", name="x", source="a", target="b", cardinality=""),
    c(type="graph_define_link_type", graph="g", name="x", source="", target="b"),
    c(type="graph_define_link_type", graph="g", name="x", source="a", target="_b"),
    c(type="graph_define_link_type", graph="g", name="", source="a", target="b"),
    c(type="graph_define_link_type", graph="g", name="x", source="a"),
    c(type="graph_get_ontology", graph="g"),
    c(type="graph_ontology_summary", graph="g"),
    c(type="graph_freeze_ontology", graph="g"),
    c(type="graph_delete_link_type", graph="g", name="dangling"),
    c(type="graph_delete_link_type", graph="g", name="dangling"),
    c(type="graph_delete_object_type", graph="g", name="a/b"),
    c(type="graph_delete_object_type", graph="g", name=""),
    c(type="graph_delete_link_type", graph="g", name="_x"),
    c(type="graph_delete_object_type", graph="nope", name="a"),
    # The type names a link names need not exist while the ontology is a draft; deleting one breaks the freeze.
    c(type="graph_delete_object_type", graph="g", name="company"),
    c(type="graph_freeze_ontology", graph="g"),
    c(type="graph_define_object_type", graph="g", name="company"),
    ("strata_command", {"command": {"type": "graph_freeze_ontology", "graph": "g"}}, {"fz": "data.commit.timestamp"}),
    c(type="graph_get_ontology", graph="g"),
    c(type="graph_freeze_ontology", graph="g"),
    c(type="graph_define_object_type", graph="g", name="late"),
    c(type="graph_define_link_type", graph="g", name="late", source="person", target="person"),
    c(type="graph_delete_object_type", graph="g", name="person"),
    c(type="graph_delete_object_type", graph="g", name="zz"),
    c(type="graph_delete_object_type", graph="g", name=""),
    c(type="graph_delete_link_type", graph="g", name="knows"),
    c(type="graph_get_ontology", graph="g", as_of="$fz"),
    # Every type deleted again: the record stays, with no types.
    c(type="graph_create", graph="h"),
    c(type="graph_define_link_type", graph="h", name="l", source="a", target="a"),
    c(type="graph_delete_link_type", graph="h", name="l"),
    c(type="graph_get_ontology", graph="h"),
    c(type="graph_ontology_summary", graph="h"),
    c(type="graph_freeze_ontology", graph="h"),
    # Deleting the graph takes its ontology with it.
    c(type="graph_delete", graph="h", force=True),
    c(type="graph_create", graph="h"),
    c(type="graph_get_ontology", graph="h"),
    c(type="graph_define_object_type", graph="h", name="only", space="s1"),
    c(type="graph_create", graph="h", space="s1"),
    c(type="graph_define_object_type", graph="h", name="only", space="s1"),
    c(type="graph_get_ontology", graph="h", space="s1"),
    c(type="graph_get_ontology", graph="h"),
    c(type="graph_delete", graph="h", space="s1"),
    c(type="graph_delete", graph="h", space="s1", force=True),
    c(type="graph_get_ontology", graph="h", space="s1"),
]

FROZEN = [
    c(type="graph_create", graph="g"),
    c(type="graph_add_node", graph="g", node_id="pre", object_type="ghost"),
    c(type="graph_add_node", graph="g", node_id="pre2", properties={"x": 1}),
    c(type="graph_define_object_type", graph="g", name="person",
      properties={"age": {"value_type": "integer", "required": True}, "nick": {"value_type": "string"}}),
    c(type="graph_define_object_type", graph="g", name="company"),
    c(type="graph_define_link_type", graph="g", name="works_at", source="person", target="company"),
    c(type="graph_define_link_type", graph="g", name="knows", source="person", target="person"),
    c(type="graph_add_node", graph="g", node_id="d1", object_type="undeclared"),
    c(type="graph_add_edge", graph="g", src="pre", edge_type="works_at", dst="pre2"),
    ("strata_command", {"command": {"type": "graph_freeze_ontology", "graph": "g"}}, {"fz": "data.commit.timestamp"}),
    c(type="graph_add_node", graph="g", node_id="n0"),
    c(type="graph_add_node", graph="g", node_id="n1", object_type="ghost"),
    c(type="graph_add_node", graph="g", node_id="n2", object_type="person"),
    c(type="graph_add_node", graph="g", node_id="n2", object_type="person", properties={"nick": "x"}),
    c(type="graph_add_node", graph="g", node_id="n2", object_type="person", properties={"age": "old"}),
    c(type="graph_add_node", graph="g", node_id="n2", object_type="person", properties={"age": None}),
    c(type="graph_add_node", graph="g", node_id="n3", object_type="person", properties={"age": 3, "other": 1}),
    c(type="graph_add_node", graph="g", node_id="c1", object_type="company"),
    c(type="graph_add_node", graph="g", node_id="", object_type="ghost"),
    c(type="graph_add_node", graph="g", node_id="x", object_type=""),
    c(type="graph_add_node", graph="g", node_id="x", object_type="_t"),
    c(type="graph_add_node", graph="g", node_id="x", object_type="ghost", properties=[1]),
    c(type="graph_add_node", graph="nope", node_id="x", object_type="ghost"),
    c(type="graph_add_edge", graph="g", src="n3", edge_type="works_at", dst="c1"),
    c(type="graph_add_edge", graph="g", src="c1", edge_type="works_at", dst="n3"),
    c(type="graph_add_edge", graph="g", src="n3", edge_type="works_at", dst="n2"),
    c(type="graph_add_edge", graph="g", src="n3", edge_type="likes", dst="c1"),
    c(type="graph_add_edge", graph="g", src="n3", edge_type="likes", dst="missing"),
    c(type="graph_add_edge", graph="g", src="n3", edge_type="works_at", dst="n0"),
    c(type="graph_add_edge", graph="g", src="n0", edge_type="works_at", dst="c1"),
    c(type="graph_add_edge", graph="g", src="pre", edge_type="works_at", dst="c1"),
    c(type="graph_add_edge", graph="g", src="n3", edge_type="knows", dst="pre"),
    c(type="graph_add_edge", graph="g", src="n3", edge_type="knows", dst="n2"),
    c(type="graph_ontology_summary", graph="g"),
    c(type="graph_ontology_summary", graph="g", as_of="$fz"),
    bw(un("z", object_type="ghost"), graph="g"),
    bw(un("z", object_type="person"), graph="g"),
    bw(un("z", object_type="person", properties={"age": 1}), ue("z", "works_at", "c1"), graph="g"),
    bw(un("y", object_type="company"), ue("n3", "works_at", "y"), ue("y", "works_at", "n3"), graph="g"),
    bw(ue("n3", "knows", "n2"), un("n2", object_type="company"), graph="g"),
    bw(dn("c1"), un("c1", object_type="person", properties={"age": 2}), ue("c1", "knows", "n3"), graph="g"),
    bw(ue("c1", "nope", "n3"), graph="g"),
    c(type="graph_bulk_insert", graph="g", nodes=[{"node_id": "q", "object_type": "ghost"}]),
    c(type="graph_bulk_insert", graph="g", nodes=[{"node_id": "q", "object_type": "person"}]),
    c(type="graph_bulk_insert", graph="g", nodes=[{"node_id": "q", "object_type": "company"},
                                                  {"node_id": "q2", "object_type": "person", "properties": {"age": 9}}],
      edges=[{"src": "q2", "edge_type": "works_at", "dst": "q"}]),
    c(type="graph_bulk_insert", graph="g", edges=[{"src": "q", "edge_type": "works_at", "dst": "q2"}]),
    c(type="graph_bulk_insert", graph="g", edges=[{"src": "q", "edge_type": "zz", "dst": "q2"}]),
    c(type="graph_list_nodes", graph="g"),
    c(type="graph_ontology_summary", graph="g"),
    c(type="graph_nodes_by_type", graph="g", object_type="person"),
    c(type="graph_nodes_by_type", graph="g", object_type="person", as_of="$fz"),
    c(type="graph_get_meta", graph="g"),
]

BY_TYPE = [
    c(type="graph_create", graph="g"),
    c(type="graph_add_node", graph="g", node_id="a", object_type="person"),
    c(type="graph_add_node", graph="g", node_id="b", object_type="person", properties={"x": 1}),
    c(type="graph_add_node", graph="g", node_id="ab", object_type="person"),
    c(type="graph_add_node", graph="g", node_id="c", object_type="robot"),
    c(type="graph_add_node", graph="g", node_id="d"),
    c(type="graph_nodes_by_type", graph="g", object_type="person"),
    c(type="graph_nodes_by_type", graph="g", object_type="person", limit=1),
    c(type="graph_nodes_by_type", graph="g", object_type="person", limit=2, cursor="a"),
    c(type="graph_nodes_by_type", graph="g", object_type="person", cursor="aa"),
    c(type="graph_nodes_by_type", graph="g", object_type="person", limit=0),
    c(type="graph_nodes_by_type", graph="g", object_type="person", cursor=""),
    c(type="graph_nodes_by_type", graph="g", object_type=""),
    c(type="graph_nodes_by_type", graph="g", object_type="_p"),
    c(type="graph_nodes_by_type", graph="g", object_type="zz"),
    c(type="graph_nodes_by_type", graph="zz", object_type="zz"),
    c(type="graph_nodes_by_type", graph="g"),
    c(type="graph_ontology_summary", graph="g"),
    c(type="graph_define_object_type", graph="g", name="person"),
    c(type="graph_ontology_summary", graph="g"),
    c(type="graph_add_node", graph="g", node_id="a", object_type="robot"),
    c(type="graph_add_node", graph="g", node_id="b"),
    c(type="graph_nodes_by_type", graph="g", object_type="person"),
    c(type="graph_nodes_by_type", graph="g", object_type="robot"),
    c(type="graph_get_node", graph="g", node_id="a"),
    c(type="graph_neighbors", graph="g", node_id="a", direction="both"),
    c(type="graph_sample", graph="g", count=2),
]

BINDINGS = [
    c(type="graph_create", graph="g"),
    c(type="graph_create", graph="h"),
    c(type="graph_add_node", graph="g", node_id="a", binding={"target": K}),
    c(type="graph_add_node", graph="g", node_id="b", binding={"target": K}, object_type="t", properties={"p": 1}),
    c(type="graph_add_node", graph="g", node_id="c"),
    c(type="graph_add_node", graph="g", node_id="j", binding={"target": t("json", key="d1", branch="default")}),
    c(type="graph_add_node", graph="g", node_id="v", binding={"target": t("vector", space="s", key="c/k")}),
    c(type="graph_add_node", graph="g", node_id="e", binding={"target": t("event", key="7"), "extra": 1}),
    c(type="graph_add_node", graph="g", node_id="gg", binding={"target": {**t("graph", key="h"), "zz": 1}}),
    c(type="graph_add_node", graph="h", node_id="a", binding={"target": K}),
    c(type="graph_add_node", graph="h", node_id="b", binding={"target": K}),
    c(type="graph_get_node", graph="g", node_id="b"),
    c(type="graph_get_node", graph="g", node_id="j"),
    c(type="graph_list_nodes", graph="g"),
    # Refused bindings.
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": t(branch="other")}),
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": t(branch="")}),
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": t(branch="_b")}),
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": t(space="")}),
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": t(space="_s")}),
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": t(key="")}),
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": t("xx")}),
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": {}}),
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": {"primitive": "kv"}}),
    c(type="graph_add_node", graph="g", node_id="x", binding={}),
    c(type="graph_add_node", graph="g", node_id="x", binding=1),
    c(type="graph_add_node", graph="g", node_id="x", binding={"target": None}),
    c(type="graph_add_node", graph="nope", node_id="x", binding={"target": t(key="")}),
    # Lookups.
    c(type="graph_bindings_for_entity", target=K),
    c(type="graph_bindings_for_entity", target=K, limit=1),
    c(type="graph_bindings_for_entity", target=K, limit=2, cursor="g\x1fa"),
    *[c(type="graph_bindings_for_entity", target=K, cursor=x) for x in ("a", "g", "g\x1fb", "h", "zz", "")],
    c(type="graph_bindings_for_entity", target=t("json", key="d1", branch="default")),
    c(type="graph_bindings_for_entity", target=t("json", key="d1")),
    c(type="graph_bindings_for_entity", target=t(branch="other")),
    c(type="graph_bindings_for_entity", target=t(key="")),
    c(type="graph_bindings_for_entity", target=t(space="")),
    c(type="graph_bindings_for_entity", target=K, space="s1"),
    c(type="graph_bindings_for_entity", target=K, limit=0),
    c(type="graph_bindings_for_entity"),
    # Policies.
    c(type="graph_add_edge", graph="g", src="a", edge_type="e", dst="c"),
    c(type="graph_add_edge", graph="g", src="c", edge_type="e", dst="b"),
    c(type="graph_add_edge", graph="g", src="a", edge_type="e", dst="b"),
    c(type="graph_add_edge", graph="g", src="b", edge_type="e", dst="b"),
    c(type="graph_apply_delete_policy", target=K, policy="zzz"),
    c(type="graph_apply_delete_policy", target=t(key="none"), policy="cascade"),
    c(type="graph_apply_delete_policy", target=t(key="none"), policy="keep_dangling"),
    c(type="graph_apply_delete_policy", target=K, policy="keep_dangling"),
    ("strata_command", {"command": {"type": "graph_apply_delete_policy", "target": K, "policy": "detach"}},
     {"dt": "data.commit.timestamp"}),
    c(type="graph_list_nodes", graph="g"),
    c(type="graph_get_meta", graph="g"),
    c(type="graph_get_meta", graph="h"),
    c(type="graph_bindings_for_entity", target=K),
    c(type="graph_bindings_for_entity", target=K, as_of="$dt"),
    c(type="graph_add_node", graph="g", node_id="a", binding={"target": K}),
    c(type="graph_add_node", graph="g", node_id="b", binding={"target": K}, object_type="t"),
    c(type="graph_apply_delete_policy", target=K, policy="cascade"),
    c(type="graph_list_nodes", graph="g"),
    c(type="graph_list_nodes", graph="h"),
    c(type="graph_get_meta", graph="g"),
    c(type="graph_neighbors", graph="g", node_id="c", direction="both"),
    c(type="graph_apply_delete_policy", target=K, policy="cascade"),
    c(type="graph_apply_delete_policy", target=t(key=""), policy="detach"),
    c(type="graph_apply_delete_policy", target=t(branch="zz"), policy="detach"),
    c(type="graph_apply_delete_policy", target=t(branch="default"), policy="detach"),
    c(type="graph_apply_delete_policy", target=t("json", key="d1", branch="default"), policy="detach"),
    c(type="graph_apply_delete_policy", target=K, policy="detach", space="s1"),
    # Batches and bulk inserts carry bindings too; a fork sees its parent's.
    bw(un("p", binding={"target": K}, object_type="t"), un("q", binding={"target": t(branch="x")}), graph="g"),
    bw(un("p", binding={"target": K}, object_type="t"), un("q", binding={"target": K}), graph="g"),
    c(type="graph_bulk_insert", graph="g", nodes=[{"node_id": "r", "binding": {"target": K}},
                                                  {"node_id": "s", "binding": {"target": t(key="")}}]),
    c(type="graph_bulk_insert", graph="g", nodes=[{"node_id": "r", "binding": {"target": K}, "object_type": "u"},
                                                  {"node_id": "s", "binding": None}]),
    c(type="graph_bindings_for_entity", target=K),
    ("strata_branch_fork", {"source": "default", "branch": "f"}),
    c(type="graph_bindings_for_entity", target=K, branch="f"),
    c(type="graph_apply_delete_policy", target=K, policy="cascade", branch="f"),
    c(type="graph_apply_delete_policy", target=t(branch="default"), policy="cascade", branch="f"),
    c(type="graph_bindings_for_entity", target=K),
    c(type="graph_bindings_for_entity", target=K, branch="f"),
]

SCRIPTS = {"ontology_definitions": DEFINITIONS, "ontology_frozen_writes": FROZEN,
           "ontology_nodes_by_type": BY_TYPE, "ontology_bindings": BINDINGS}


NODES = ["n1", "n2", "n3", "n4", "n5"]
TYPES = ["person", "company", "ghost"]
LINKS = ["works_at", "knows", "likes"]
TARGETS = [t(key="k1"), t(key="k2"), t("json", key="d"), t("vector", space="s1", key="v")]


def random_ontology_script(seed: int, steps: int) -> list:
    """Ontology definitions, typed and bound node writes, freezes and lookups, over a fork and a space."""
    rng = random.Random(seed)
    script: list = [c(type="graph_create", graph="g"), c(type="graph_create", graph="g", space="s1"),
                    c(type="graph_create", graph="h")]
    branches = ["default"]
    for n in range(steps):
        scope: dict = {}
        branch = rng.choice(branches)
        if branch != "default":
            scope["branch"] = branch
        if rng.random() < 0.2:
            scope["space"] = "s1"
        graph = rng.choice(["g", "g", "h"]) if "space" not in scope else "g"
        roll = rng.random()
        node_extra = {}
        if rng.random() < 0.6:
            node_extra["object_type"] = rng.choice(TYPES)
        if rng.random() < 0.4:
            node_extra["binding"] = {"target": rng.choice(TARGETS)}
        if rng.random() < 0.5:
            node_extra["properties"] = rng.choice([{"age": n}, {"name": "x"}, {}])
        if roll < 0.08:
            props = rng.choice([None, {"age": {"value_type": "integer", "required": rng.random() < 0.5}}])
            step = c(type="graph_define_object_type", graph=graph, name=rng.choice(TYPES[:2]),
                     **({"properties": props} if props else {}), **scope)
        elif roll < 0.13:
            step = c(type="graph_define_link_type", graph=graph, name=rng.choice(LINKS),
                     source=rng.choice(TYPES), target=rng.choice(TYPES[:2]), **scope)
        elif roll < 0.16:
            step = c(type=rng.choice(["graph_delete_object_type", "graph_delete_link_type"]), graph=graph,
                     name=rng.choice(TYPES + LINKS), **scope)
        elif roll < 0.19:
            step = c(type="graph_freeze_ontology", graph=graph, **scope)
        elif roll < 0.42:
            step = c(type="graph_add_node", graph=graph, node_id=rng.choice(NODES), **node_extra, **scope)
        elif roll < 0.55:
            step = c(type="graph_add_edge", graph=graph, src=rng.choice(NODES), dst=rng.choice(NODES),
                     edge_type=rng.choice(LINKS), **scope)
        elif roll < 0.6:
            ops = [un(rng.choice(NODES), **node_extra), ue(rng.choice(NODES), rng.choice(LINKS), rng.choice(NODES))]
            if rng.random() < 0.3:
                ops.append(rng.choice([dn(rng.choice(NODES)), de(rng.choice(NODES), "knows", rng.choice(NODES))]))
            step = bw(*ops, graph=graph, **scope)
        elif roll < 0.63:
            step = c(type="graph_bulk_insert", graph=graph, nodes=[{"node_id": rng.choice(NODES), **node_extra}],
                     **scope)
        elif roll < 0.66:
            step = c(type="graph_remove_node", graph=graph, node_id=rng.choice(NODES), **scope)
        elif roll < 0.7:
            step = c(type="graph_apply_delete_policy", target=rng.choice(TARGETS),
                     policy=rng.choice(["cascade", "detach", "keep_dangling"]), **scope)
        elif roll < 0.73 and len(branches) < 3:
            name = f"b{n}"
            step = ("strata_branch_fork", {"source": branch, "branch": name})
            branches.append(name)
        else:
            wire = rng.choice(["graph_get_ontology", "graph_ontology_summary", "graph_nodes_by_type",
                               "graph_bindings_for_entity", "graph_list_nodes", "graph_get_meta"])
            if wire == "graph_bindings_for_entity":
                step = c(type=wire, target=rng.choice(TARGETS), **scope, **rng.choice([{}, {"limit": 1}]))
            elif wire == "graph_nodes_by_type":
                step = c(type=wire, graph=graph, object_type=rng.choice(TYPES), **scope)
            else:
                step = c(type=wire, graph=graph, **scope)
        script.append(step)
    return script
