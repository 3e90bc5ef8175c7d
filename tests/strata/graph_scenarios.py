"""Scripted histories for the graph commands past the curated tools (issue 23).

Analytics on small graphs whose answers hinge on the engine's rules (tie
orders, truncation, oscillating label propagation, convergence counts),
graph batches and bulk inserts, run through both engines by
test_graph_commands.py.
"""

from __future__ import annotations

import random

from .scenarios import cmd


def build(graph: str, nodes: list[str], edges: list[tuple], space: str | None = None) -> list:
    scope = {"space": space} if space else {}
    steps = [cmd(type="graph_create", graph=graph, **scope)]
    steps += [cmd(type="graph_add_node", graph=graph, node_id=n, **scope) for n in nodes]
    for e in edges:
        extra = {"weight": e[3]} if len(e) > 3 else {}
        steps.append(cmd(type="graph_add_edge", graph=graph, src=e[0], edge_type=e[1], dst=e[2], **extra, **scope))
    return steps


MIXED = build("g", ["a", "b", "c", "d", "e", "f"],
              [("a", "x", "b", 1), ("b", "x", "c", 2), ("a", "y", "c", 5), ("c", "x", "a", 1),
               ("d", "x", "e", 1), ("a", "x", "d", 0.5)])
CHAIN = build("chain", ["a", "b", "c", "d"], [("a", "x", "b"), ("b", "x", "c"), ("c", "x", "d")])
MULTI = build("multi", ["a", "b", "c"], [("a", "x", "b"), ("a", "y", "b"), ("a", "x", "c"), ("b", "x", "b")])
ORDERS = build("ord", ["B", "a", "c", "10", "9", "s", "z"],
               [("B", "x", "a"), ("a", "x", "B"), ("c", "x", "10"), ("c", "x", "9"), ("10", "x", "9"),
                ("s", "z", "a"), ("B", "a", "s"), ("c", "m", "s"), ("s", "m", "z")])
TIES = build("ties", ["s", "z", "b", "t", "q", "r"],
             [("s", "x", "z", 1), ("s", "x", "b", 1), ("z", "x", "t", 1), ("b", "x", "t", 1),
              ("s", "y", "z", 0.5), ("q", "w", "r", -2)])

ANALYTICS = [
    *MIXED, *CHAIN, *MULTI, *ORDERS, *TIES,
    cmd(type="graph_create", graph="empty"),
    # PageRank: defaults, convergence counts, personalization, options.
    cmd(type="graph_pagerank", graph="g"),
    cmd(type="graph_pagerank", graph="multi"),
    cmd(type="graph_pagerank", graph="ord"),
    cmd(type="graph_pagerank", graph="empty"),
    *[cmd(type="graph_pagerank", graph="chain", tolerance=t, max_iterations=100) for t in (0.1, 1e-2, 1e-4)],
    cmd(type="graph_pagerank", graph="chain", max_iterations=100),
    cmd(type="graph_pagerank", graph="chain", max_iterations=0),
    cmd(type="graph_pagerank", graph="chain", tolerance=0),
    cmd(type="graph_pagerank", graph="chain", damping=0),
    cmd(type="graph_pagerank", graph="chain", damping=1),
    cmd(type="graph_pagerank", graph="chain", damping=1.5),
    cmd(type="graph_pagerank", graph="chain", damping=-0.1),
    cmd(type="graph_pagerank", graph="chain", tolerance=-1),
    cmd(type="graph_pagerank", graph="chain", personalization={"a": 1, "b": 3}),
    cmd(type="graph_pagerank", graph="g", personalization={"a": 1, "ghost": 5}),
    cmd(type="graph_pagerank", graph="chain", personalization={}),
    cmd(type="graph_pagerank", graph="chain", personalization={"zz": 1}),
    cmd(type="graph_pagerank", graph="chain", personalization={"a": -1}),
    cmd(type="graph_pagerank", graph="chain", personalization={"a": 0}),
    cmd(type="graph_pagerank", graph="chain", personalization={"a": "x"}),
    cmd(type="graph_pagerank", graph="chain", personalization=[1]),
    cmd(type="graph_pagerank", graph="chain", max_iterations=-1),
    cmd(type="graph_pagerank", graph="nope", damping=1.5),
    cmd(type="graph_pagerank", graph="nope"),
    cmd(type="graph_pagerank", graph="chain", personalization={"zz": 1}, budget={"max_nodes": 1}),
    # Components, clustering, label propagation.
    cmd(type="graph_wcc", graph="g"),
    cmd(type="graph_wcc", graph="ord"),
    cmd(type="graph_wcc", graph="empty"),
    cmd(type="graph_lcc", graph="g"),
    cmd(type="graph_lcc", graph="multi"),
    cmd(type="graph_lcc", graph="ord"),
    cmd(type="graph_cdlp", graph="g"),
    *[cmd(type="graph_cdlp", graph="g", max_iterations=i) for i in (0, 1, 2, 3, 7, 1000)],
    cmd(type="graph_cdlp", graph="g", direction="outgoing", max_iterations=1),
    cmd(type="graph_cdlp", graph="g", direction="incoming", max_iterations=3),
    cmd(type="graph_cdlp", graph="ord", max_iterations=1),
    cmd(type="graph_cdlp", graph="ord"),
    cmd(type="graph_cdlp", graph="empty"),
    # BFS: orders, bounds, truncation, edge-type filters.
    cmd(type="graph_bfs", graph="g", start="a"),
    cmd(type="graph_bfs", graph="g", start="c", direction="both", max_depth=1),
    cmd(type="graph_bfs", graph="ord", start="s", direction="both"),
    cmd(type="graph_bfs", graph="ord", start="s", direction="incoming"),
    cmd(type="graph_bfs", graph="ord", start="s", max_depth=0),
    cmd(type="graph_bfs", graph="ord", start="s", max_nodes=2),
    cmd(type="graph_bfs", graph="ord", start="s", max_nodes=0),
    cmd(type="graph_bfs", graph="ord", start="B", max_depth=1),
    cmd(type="graph_bfs", graph="ord", start="s", edge_types=["m"], direction="both"),
    cmd(type="graph_bfs", graph="ord", start="s", edge_types=[]),
    cmd(type="graph_bfs", graph="ord", start="s", edge_types=["nope"]),
    cmd(type="graph_bfs", graph="ord", start="s", edge_types=[""]),
    cmd(type="graph_bfs", graph="ord", start="s", edge_types="x"),
    cmd(type="graph_bfs", graph="ord", start="s", edge_types=[1]),
    cmd(type="graph_bfs", graph="ord", start=""),
    cmd(type="graph_bfs", graph="", start=""),
    cmd(type="graph_bfs", graph="ord", start="ghost"),
    cmd(type="graph_bfs", graph="chain", start="a", max_nodes=2),
    cmd(type="graph_bfs", graph="chain", start="a", max_depth=1),
    cmd(type="graph_bfs", graph="chain", start="a", budget={"max_nodes": 1}),
    cmd(type="graph_bfs", graph="ord", start="s", branch="nob"),
    cmd(type="graph_bfs", graph="ord", start="s", space=""),
    # SSSP: ties, directions, negative weights, filters.
    cmd(type="graph_sssp", graph="g", source="a"),
    cmd(type="graph_sssp", graph="g", source="c", direction="incoming"),
    cmd(type="graph_sssp", graph="g", source="c", direction="both"),
    cmd(type="graph_sssp", graph="ties", source="s"),
    cmd(type="graph_sssp", graph="ties", source="s", edge_types=["x"]),
    cmd(type="graph_sssp", graph="ties", source="s", edge_types=["x", "y"], direction="both"),
    cmd(type="graph_sssp", graph="ties", source="q", edge_types=["w"]),
    cmd(type="graph_sssp", graph="ties", source="ghost"),
    cmd(type="graph_sssp", graph="ties", source="s", direction="up"),
    # Budgets.
    cmd(type="graph_wcc", graph="g", budget={"max_nodes": 2}),
    cmd(type="graph_wcc", graph="g", budget={"max_edges": 2}),
    cmd(type="graph_wcc", graph="g", budget={"max_nodes": 1, "max_edges": 0}),
    cmd(type="graph_wcc", graph="g", budget={"max_nodes": 6, "max_edges": 6}),
    cmd(type="graph_wcc", graph="g", budget={}),
    cmd(type="graph_wcc", graph="g", budget={"max_nodes": None}),
    cmd(type="graph_wcc", graph="g", budget=[100, 100]),
    cmd(type="graph_wcc", graph="g", budget=[1, 2, 3]),
    cmd(type="graph_wcc", graph="g", budget={"zz": 1}),
    cmd(type="graph_wcc", graph="g", budget=3),
    cmd(type="graph_wcc", graph="g", budget={"max_nodes": -1}),
    cmd(type="graph_lcc", graph="g", budget={"max_edges": 5}),
    cmd(type="graph_cdlp", graph="g", budget={"max_nodes": 5}),
    cmd(type="graph_sssp", graph="g", source="ghost", budget={"max_nodes": 1}),
]

# Weights that are each finite but overflow together: a path length past f64's range (the
# engine writes it `null`, never `Infinity`), personalization weights whose sum overflows.
OVERFLOW = build("huge", ["a", "b", "c", "d"], [("a", "x", "b", 1.7e308), ("b", "x", "c", 1.7e308),
                                                ("c", "x", "d", 1.0)]) + [
    cmd(type="graph_sssp", graph="huge", source="a"),
    cmd(type="graph_sssp", graph="huge", source="d", direction="incoming"),
    cmd(type="graph_pagerank", graph="huge", personalization={"a": 1.7e308}),
    cmd(type="graph_pagerank", graph="huge", personalization={"a": 1.7e308, "zz": 1.7e308}),
    cmd(type="graph_pagerank", graph="huge", personalization={"a": 1.7e308, "b": 1.7e308}),
    cmd(type="graph_pagerank", graph="huge", personalization={"a": 1e308, "b": 1e308, "c": 1e-300}),
]

TIME_TRAVEL = [
    cmd(type="graph_create", graph="tt"),
    cmd(type="graph_add_node", graph="tt", node_id="a"),
    cmd(type="graph_add_node", graph="tt", node_id="b"),
    (*cmd(type="graph_add_edge", graph="tt", src="a", edge_type="x", dst="b"), {"t1": "data.commit.timestamp"}),
    cmd(type="graph_add_node", graph="tt", node_id="c"),
    cmd(type="graph_add_edge", graph="tt", src="b", edge_type="x", dst="c"),
    cmd(type="graph_pagerank", graph="tt"),
    cmd(type="graph_pagerank", graph="tt", as_of="$t1"),
    cmd(type="graph_wcc", graph="tt", as_of="$t1"),
    cmd(type="graph_bfs", graph="tt", start="a", as_of="$t1"),
    cmd(type="graph_bfs", graph="tt", start="c", as_of="$t1"),
    cmd(type="graph_wcc", graph="tt", as_of=0),
    ("strata_branch_fork", {"source": "default", "branch": "fk"}),
    cmd(type="graph_remove_node", graph="tt", node_id="b", branch="fk"),
    cmd(type="graph_wcc", graph="tt", branch="fk"),
    cmd(type="graph_lcc", graph="tt", branch="fk"),
    cmd(type="graph_wcc", graph="tt"),
    cmd(type="graph_create", graph="tt", space="s1"),
    cmd(type="graph_wcc", graph="tt", space="s1"),
]



def bw(*ops, graph="bg", **scope):
    return cmd(type="graph_batch_write", graph=graph, operations=list(ops), **scope)


def un(node_id, **data):
    return {"type": "upsert_node", "node_id": node_id, "data": data}


def ue(src, edge_type, dst, **data):
    return {"type": "upsert_edge", "src": src, "edge_type": edge_type, "dst": dst, "data": data}


def dn(node_id):
    return {"type": "delete_node", "node_id": node_id}


def de(src, edge_type, dst):
    return {"type": "delete_edge", "src": src, "edge_type": edge_type, "dst": dst}


BATCHES = [
    cmd(type="graph_create", graph="bg"),
    bw(un("a"), un("b", properties={"x": 1}), ue("a", "e", "b", weight=2), un("a", properties={"y": 2}),
       de("a", "e", "zz"), dn("nope")),
    cmd(type="graph_get_meta", graph="bg"),
    cmd(type="graph_get_node", graph="bg", node_id="a"),
    cmd(type="graph_get_edge", graph="bg", src="a", edge_type="e", dst="b"),
    bw(un("a", zz=1)),
    bw(ue("a", "e", "b", zz=1)),
    bw({"type": "upsert_node", "node_id": "a", "data": 3}),
    bw({"type": "upsert_node", "node_id": "a", "data": None}),
    bw({"type": "upsert_node", "node_id": "a"}),
    bw({"type": "upsert_node", "node_id": "a", "zz": 1, "data": {}}),
    bw({"type": "delete_node", "node_id": "a", "data": {}}),
    bw({"type": "upsert_edge", "src": "a", "edge_type": "e", "dst": "b", "weight": 3}),
    bw({"type": "zz"}),
    bw({"op": "upsert_node"}),
    bw(1),
    cmd(type="graph_batch_write", graph="bg", operations={}),
    bw(dn("a"), ue("a", "e", "b")),
    bw(ue("b", "e", "c"), un("c")),
    bw(un("c"), ue("b", "e", "c"), de("b", "e", "c"), un("")),
    bw(ue("b", "f", "a", weight=-3), dn("a")),
    cmd(type="graph_get_meta", graph="bg"),
    cmd(type="graph_neighbors", graph="bg", node_id="b", direction="both"),
    bw(dn("b"), un("b")),
    bw(un("a"), un("a"), dn("a"), dn("a")),
    bw(dn("a")),
    bw(),
    bw(un("q", properties=3)),
    bw(ue("b", "e", "b", properties=[1])),
    bw(un("b"), ue("b", "e", "b"), ue("b", "e", "b", weight=4, properties={"k": 1})),
    cmd(type="graph_get_meta", graph="bg"),
    cmd(type="graph_get_edge", graph="bg", src="b", edge_type="e", dst="b"),
    bw(dn("b")),
    bw(un(""), graph="nope"),
    bw(un("a"), graph="nope"),
    bw(un("a"), branch="nob"),
    bw(un("a"), space="s1"),
    bw(un("a"), un("b"), ue("a", "t", "b"), space="s1"),
    cmd(type="graph_create", graph="bg", space="s1"),
    bw(un("a"), un("b"), ue("a", "t", "b"), ue("b", "t", "a"), space="s1"),
    bw(dn("a"), space="s1"),
    cmd(type="graph_get_meta", graph="bg", space="s1"),
    # Bulk inserts: chunks, upserts, validation before the first chunk.
    cmd(type="graph_create", graph="bulk"),
    cmd(type="graph_bulk_insert", graph="bulk", nodes=[{"node_id": "a"}, {"node_id": "b", "properties": {"k": 1}}],
        edges=[{"src": "a", "edge_type": "x", "dst": "b"},
               {"src": "b", "edge_type": "x", "dst": "a", "weight": 2, "properties": {"p": 1}}]),
    cmd(type="graph_get_meta", graph="bulk"),
    cmd(type="graph_bulk_insert", graph="bulk", nodes=[{"node_id": f"n{i}"} for i in range(5)] + [{"node_id": "a"}],
        edges=[{"src": "n0", "edge_type": "x", "dst": "n1"}, {"src": "a", "edge_type": "x", "dst": "b"}],
        chunk_size=2),
    cmd(type="graph_get_meta", graph="bulk"),
    cmd(type="graph_get_node", graph="bulk", node_id="b"),
    cmd(type="graph_get_edge", graph="bulk", src="b", edge_type="x", dst="a"),
    cmd(type="graph_bulk_insert", graph="bulk"),
    cmd(type="graph_bulk_insert", graph="bulk", nodes=[]),
    cmd(type="graph_bulk_insert", graph="bulk", edges=[{"src": "a", "edge_type": "x", "dst": "zz"}]),
    cmd(type="graph_bulk_insert", graph="bulk", nodes=[{"node_id": ""}]),
    cmd(type="graph_bulk_insert", graph="bulk", nodes=[{"node_id": "q"}],
        edges=[{"src": "a", "edge_type": "x", "dst": "zz"}], chunk_size=1),
    cmd(type="graph_get_node", graph="bulk", node_id="q"),
    cmd(type="graph_bulk_insert", graph="bulk", edges=[{"src": "a", "edge_type": "x", "dst": "b", "weight": -1}]),
    cmd(type="graph_bulk_insert", graph="bulk", chunk_size=0, nodes=[{"node_id": "r"}, {"node_id": "s"}]),
    cmd(type="graph_bulk_insert", graph="bulk", chunk_size=10**6, nodes=[{"node_id": f"m{i}"} for i in range(900)]),
    cmd(type="graph_bulk_insert", graph="bulk", nodes=[{"node_id": "r", "zz": 1}]),
    cmd(type="graph_bulk_insert", graph="bulk", nodes=[{"node_id": "r", "properties": [1]}]),
    cmd(type="graph_bulk_insert", graph="bulk", edges=[{"src": "r", "edge_type": "x", "dst": "s", "zz": 1}]),
    cmd(type="graph_bulk_insert", graph="bulk", edges=[{"src": "r", "edge_type": "", "dst": "s"}]),
    cmd(type="graph_bulk_insert", graph="bulk", nodes=[{"node_id": "r"}, {"node_id": "r", "properties": {"v": 2}}]),
    cmd(type="graph_bulk_insert", graph="bulk", nodes=["r"]),
    cmd(type="graph_bulk_insert", graph="nope", nodes=[{"node_id": "r"}]),
    cmd(type="graph_get_meta", graph="bulk"),
    cmd(type="graph_get_node", graph="bulk", node_id="r"),
    cmd(type="graph_pagerank", graph="bulk"),
]

LISTING = [
    cmd(type="graph_create", graph="ln"),
    *[(*cmd(type="graph_add_node", graph="ln", node_id=n, properties={"n": n}), {f"l{i}": "data.commit.timestamp"})
      for i, n in enumerate(["a", "ab", "a-1", "b", "c", "d", "e", "\u00e9"])],
    cmd(type="graph_list_nodes", graph="ln", limit=2),
    cmd(type="graph_list_nodes", graph="ln", prefix="a"),
    cmd(type="graph_list_nodes", graph="ln", cursor="a", limit=2),
    cmd(type="graph_list_nodes", graph="ln", cursor="ab", limit=2),
    cmd(type="graph_list_nodes", graph="ln", cursor="zz"),
    cmd(type="graph_list_nodes", graph="ln", cursor="a", prefix="a"),
    cmd(type="graph_list_nodes", graph="ln", limit=0),
    cmd(type="graph_list_nodes", graph="ln", prefix=""),
    cmd(type="graph_list_nodes", graph="ln", prefix="zz"),
    cmd(type="graph_list_nodes", graph="ln", as_of="$l3"),
    cmd(type="graph_list_nodes", graph="nope"),
    *[cmd(type="graph_sample", graph="ln", count=c) for c in (None, 0, 1, 3, 4, 5, 7, 8, 100)],
    cmd(type="graph_sample", graph="nope"),
    cmd(type="graph_remove_node", graph="ln", node_id="b"),
    cmd(type="graph_sample", graph="ln", count=3),
    cmd(type="graph_list_nodes", graph="ln"),
]

SCRIPTS = {"graph_listing": LISTING, "graph_analytics": ANALYTICS, "graph_overflow": OVERFLOW, "graph_analytics_time_travel": TIME_TRAVEL, "graph_batches": BATCHES}


NODES = ["n1", "n2", "n3", "n4", "n5", "n6"]
EDGE_TYPES = ["uses", "owns"]
ANALYTICS_COMMANDS = ("graph_pagerank", "graph_wcc", "graph_lcc", "graph_cdlp", "graph_bfs", "graph_sssp")


def random_graph_script(seed: int, steps: int) -> list:
    """Graph writes (single and batched) mixed with every analytics command, over a fork and a space."""
    rng = random.Random(seed)
    script: list = [cmd(type="graph_create", graph="g"), cmd(type="graph_create", graph="g", space="s1")]
    branches = ["default"]
    stamps: list[str] = []
    for n in range(steps):
        scope = {}
        branch = rng.choice(branches)
        if branch != "default":
            scope["branch"] = branch
        if rng.random() < 0.2:
            scope["space"] = "s1"
        as_of = {"as_of": "$" + rng.choice(stamps)} if stamps and rng.random() < 0.2 else {}
        roll = rng.random()
        step: tuple
        if roll < 0.2:
            step = (*cmd(type="graph_add_node", graph="g", node_id=rng.choice(NODES), **scope),
                    {f"t{n}": "data.commit.timestamp"})
            stamps.append(f"t{n}")
        elif roll < 0.42:
            step = cmd(type="graph_add_edge", graph="g", src=rng.choice(NODES), dst=rng.choice(NODES),
                       edge_type=rng.choice(EDGE_TYPES), weight=rng.choice([1, 0.5, 2, 3.25]), **scope)
        elif roll < 0.46:
            step = cmd(type="graph_remove_node", graph="g", node_id=rng.choice(NODES), **scope)
        elif roll < 0.5:
            step = cmd(type="graph_remove_edge", graph="g", src=rng.choice(NODES), dst=rng.choice(NODES),
                       edge_type=rng.choice(EDGE_TYPES), **scope)
        elif roll < 0.58:
            ops = []
            for _ in range(rng.randint(1, 5)):
                pick = rng.random()
                if pick < 0.35:
                    ops.append(un(rng.choice(NODES), **rng.choice([{}, {"properties": {"v": n}}])))
                elif pick < 0.5:
                    ops.append(dn(rng.choice(NODES)))
                elif pick < 0.85:
                    ops.append(ue(rng.choice(NODES), rng.choice(EDGE_TYPES), rng.choice(NODES),
                                  **rng.choice([{}, {"weight": 2.5}])))
                else:
                    ops.append(de(rng.choice(NODES), rng.choice(EDGE_TYPES), rng.choice(NODES)))
            step = bw(*ops, graph="g", **scope)
        elif roll < 0.6:
            picked = rng.sample(NODES, 3)
            step = cmd(type="graph_bulk_insert", graph="g", nodes=[{"node_id": x} for x in picked[:2]],
                       edges=[{"src": picked[0], "edge_type": rng.choice(EDGE_TYPES), "dst": picked[2]}],
                       chunk_size=rng.choice([1, 2, 512]), **scope)
        elif roll < 0.63 and len(branches) < 3:
            name = f"b{n}"
            step = ("strata_branch_fork", {"source": branch, "branch": name})
            branches.append(name)
        else:
            wire = rng.choice(ANALYTICS_COMMANDS)
            args = dict(type=wire, graph="g", **scope, **as_of)
            if wire in ("graph_bfs", "graph_sssp"):
                args["start" if wire == "graph_bfs" else "source"] = rng.choice(NODES)
                args["direction"] = rng.choice(["outgoing", "incoming", "both"])
                if rng.random() < 0.3:
                    args["edge_types"] = [rng.choice(EDGE_TYPES)]
                if wire == "graph_bfs" and rng.random() < 0.4:
                    args["max_depth"] = rng.choice([0, 1, 2])
                    args["max_nodes"] = rng.choice([1, 3, 100])
            elif wire == "graph_pagerank" and rng.random() < 0.4:
                args["personalization"] = {rng.choice(NODES): rng.choice([1, 2.5])}
                args["damping"] = rng.choice([0.5, 0.85, 0.99])
            elif wire == "graph_cdlp":
                args["direction"] = rng.choice(["outgoing", "incoming", "both"])
                args["max_iterations"] = rng.choice([1, 2, 5, 10, 11])
            step = cmd(**args)
        script.append(step)
    return script
