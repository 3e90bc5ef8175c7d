"""Seeded random tool-call scripts for the differential suite.

Each script mixes writes and reads of every kind over a few branches and
spaces (forks at the head, at versions and at timestamps taken from earlier
receipts; deletions shadowing inherited rows; reads as of earlier commits),
so the two engines are compared on histories nobody wrote by hand.
"""

from __future__ import annotations

import random

from .random_more import extra_step

KEYS = ["a", "b", "c", "app:1", "app:2", "app:10", "z"]
DOCS = ["d1", "d2"]
PATHS = ["$", "$.x", "$.y.z", "$.list", "$.list[0]", "$.list[1]"]
SPACES = [None, None, None, "s1"]
NODES = ["n1", "n2", "n3", "n4"]
EDGE_TYPES = ["uses", "owns"]


def random_script(seed: int, steps: int) -> list:
    rng = random.Random(seed)
    extra = random.Random(seed + 1_000_003)
    branches = ["default"]
    stamps: list[str] = []
    script: list = [
        ("strata_vector_create_collection", {"collection": "vc", "dimension": 3}),
        ("strata_vector_create_collection", {"collection": "ve", "dimension": 2, "metric": "euclidean"}),
        ("strata_graph_create", {"graph": "g"}),
    ]
    for n in range(steps):
        branch = rng.choice(branches)
        scope = {"branch": branch} if branch != "default" else {}
        space = rng.choice(SPACES)
        if space:
            scope["space"] = space
        save = f"t{n}"
        as_of = {"as_of": "$" + rng.choice(stamps)} if stamps and rng.random() < 0.25 else {}
        roll = rng.random()
        if roll < 0.14:
            step = ("strata_kv_put", {"key": rng.choice(KEYS), "value": f"v{n}", **scope},
                    {save: "data.commit.timestamp"})
        elif roll < 0.18:
            step = ("strata_kv_delete", {"key": rng.choice(KEYS), **scope})
        elif roll < 0.25:
            step = ("strata_kv_get", {"key": rng.choice(KEYS), **scope, **as_of})
        elif roll < 0.30:
            step = ("strata_kv_list", {"prefix": rng.choice(["app:", "a"]), "limit": rng.choice([1, 2, 10]),
                                       **scope, **as_of})
        elif roll < 0.37:
            value = rng.choice([n, {"k": n}, [n, n + 1], "s", None, True])
            step = ("strata_json_set", {"key": rng.choice(DOCS), "path": rng.choice(PATHS), "value": value, **scope},
                    {save: "data.commit.timestamp"})
        elif roll < 0.40:
            step = ("strata_json_delete", {"key": rng.choice(DOCS), "path": rng.choice(PATHS), **scope})
        elif roll < 0.45:
            step = ("strata_json_get", {"key": rng.choice(DOCS), "path": rng.choice(PATHS), **scope, **as_of})
        elif roll < 0.51:
            coll, dim = rng.choice([("vc", 3), ("ve", 2)])
            vector = [rng.choice([0, 1, 2, -1, 0.5]) for _ in range(dim)]
            meta = rng.choice([None, {"g": rng.choice(["x", "y"])}])
            args = {"collection": coll, "key": rng.choice(KEYS), "vector": vector, **scope}
            if meta:
                args["metadata"] = meta
            step = ("strata_vector_upsert", args, {save: "data.commit.timestamp"})
        elif roll < 0.56:
            coll, dim = rng.choice([("vc", 3), ("ve", 2)])
            args = {"collection": coll, "query": [rng.choice([0, 1, 0.25]) for _ in range(dim)],
                    "k": rng.choice([1, 3, 10]), **scope, **as_of}
            if rng.random() < 0.3:
                args["filter"] = {"conditions": [{"field": "g", "op": "eq",
                                                  "value": {"type": "string", "value": "x"}}]}
            step = ("strata_vector_query", args)
        elif roll < 0.58:
            step = ("strata_command", {"command": {"type": "vector_delete", "collection": "vc",
                                                   "key": rng.choice(KEYS), **scope}})
        elif roll < 0.64:
            step = ("strata_event_append", {"event_type": rng.choice(["a", "b"]), "payload": {"n": n}, **scope},
                    {save: "data.commit.timestamp"})
        elif roll < 0.67:
            step = ("strata_event_list", {"limit": rng.choice([2, 5]), "event_type": rng.choice([None, "a"]),
                                          "after_sequence": rng.choice([None, 0, 1]), **scope, **as_of})
        elif roll < 0.72:
            step = ("strata_graph_add_node", {"graph": "g", "node_id": rng.choice(NODES), **scope},
                    {save: "data.commit.timestamp"})
        elif roll < 0.77:
            step = ("strata_graph_add_edge", {"graph": "g", "src": rng.choice(NODES), "dst": rng.choice(NODES),
                                              "edge_type": rng.choice(EDGE_TYPES), "weight": rng.choice([1, 2.5]),
                                              **scope})
        elif roll < 0.79:
            step = ("strata_command", {"command": {"type": "graph_remove_node", "graph": "g",
                                                   "node_id": rng.choice(NODES), **scope}})
        elif roll < 0.84:
            step = ("strata_graph_neighbors", {"graph": "g", "node_id": rng.choice(NODES),
                                               "direction": rng.choice(["incoming", "outgoing", "both"]),
                                               "limit": rng.choice([2, 100]), **scope, **as_of})
        elif roll < 0.88 and len(branches) < 6:
            name = f"b{n}"
            args = {"source": branch, "branch": name}
            anchor = rng.random()
            if stamps and anchor < 0.3:
                args["version"] = "$" + rng.choice(stamps)
            elif stamps and anchor < 0.5:
                args["timestamp"] = "$" + rng.choice(stamps)
            step = ("strata_branch_fork", args)
            branches.append(name)  # a refused fork leaves a name both sides refuse alike
        elif roll < 0.90:
            step = ("strata_command", {"command": {"type": "kv_scan", "limit": 3, **scope}})
        elif roll < 0.92:
            step = ("strata_command", {"command": {"type": "event_verify_chain", **scope}})
        elif roll < 0.94:
            step = ("strata_command", {"command": {"type": "graph_get_meta", "graph": "g", **scope, **as_of}})
        elif roll < 0.96:
            step = ("strata_branch_list", {})
        else:
            step = ("strata_command", {"command": {"type": "space_list", "branch": branch}})
        if len(step) == 3:
            stamps.append(save)
        script.append(step)
        more = extra_step(extra, n, scope, as_of)
        if more is not None:
            script.append(more)
    return script
