"""Seeded random histories of branch lifecycles with graphs, events and time travel.

Complements random_scripts.py (every primitive on forks) and merge_scenarios.py
(promotions of KV, JSON and vectors): here branches are also created empty,
forked at versions and times, deleted and promoted while graphs and event logs
change on both sides, and every read may be anchored at an earlier commit or
wall-clock instant.  Run through both engines by test_merge_commands.py.
"""

from __future__ import annotations

import random

from .merge_scenarios import b64
from .scenarios import cmd

NODES = ["n1", "n2", "n3", "n4"]
EDGE_TYPES = ["uses", "owns"]
KEYS = ["a", "b", "app:1"]


def _scope_and_asof(rng: random.Random, branches: list[str], stamps: list, p_version: float):
    """A step's branch, its scope (sometimes in space s1) and, sometimes, a read anchored at an
    earlier stamped commit: by its version with probability ``p_version``, else by its instant."""
    br = rng.choice(branches)
    scope = {} if br == "default" else {"branch": br}
    if rng.random() < 0.15:
        scope["space"] = "s1"
    asof = {}
    if stamps and rng.random() < 0.3:
        at = rng.choice(stamps)
        asof = {"as_of": f"$t{at}"} if rng.random() < p_version else {"as_of_time": f"$w{at}"}
    return br, scope, asof


def random_lifecycle_script(seed: int, steps: int) -> list:
    """Graph nodes and edges (with properties), events and documents over branches that are
    created, forked (at the head, a version or a time), promoted, compared and deleted, with
    reads of every kind at the head, ``as_of`` and ``as_of_time`` of earlier commits."""
    rng = random.Random(seed)
    script = [cmd(type="graph_create", graph="g")]
    branches = ["default"]
    stamps: list[int] = []  # steps whose commit a later read or fork is anchored at
    for n in range(steps):
        br, scope, asof = _scope_and_asof(rng, branches, stamps, 0.6)
        roll = rng.random()
        save = False
        if roll < 0.12:
            props = rng.choice([None, {"v": n}, {"v": n, "w": [1, 2]}])
            c = dict(type="graph_add_node", graph="g", node_id=rng.choice(NODES), **scope)
            if props:
                c["properties"] = props
            save = True
        elif roll < 0.22:
            c = dict(type="graph_add_edge", graph="g", src=rng.choice(NODES), dst=rng.choice(NODES),
                     edge_type=rng.choice(EDGE_TYPES), **scope)
            if rng.random() < 0.5:
                c["weight"] = rng.choice([1, 2.5])
            if rng.random() < 0.3:
                c["properties"] = {"p": n}
            save = True
        elif roll < 0.26:
            c = dict(type="graph_remove_node", graph="g", node_id=rng.choice(NODES), **scope)
        elif roll < 0.29:
            c = dict(type="graph_remove_edge", graph="g", src=rng.choice(NODES), dst=rng.choice(NODES),
                     edge_type=rng.choice(EDGE_TYPES), **scope)
        elif roll < 0.34:
            c = dict(type="graph_get_node", graph="g", node_id=rng.choice(NODES), **scope, **asof)
        elif roll < 0.38:
            c = dict(type="graph_get_edge", graph="g", src=rng.choice(NODES), dst=rng.choice(NODES),
                     edge_type=rng.choice(EDGE_TYPES), **scope, **asof)
        elif roll < 0.42:
            c = dict(type="graph_list_nodes", graph="g", **scope, **asof)
            if rng.random() < 0.4:
                c["limit"] = rng.choice([1, 2])
            if rng.random() < 0.3:
                c["prefix"] = "n"
        elif roll < 0.46:
            c = dict(type="graph_neighbors", graph="g", node_id=rng.choice(NODES),
                     direction=rng.choice(["incoming", "outgoing", "both"]), **scope, **asof)
            if rng.random() < 0.3:
                c["edge_type"] = rng.choice(EDGE_TYPES)
            if rng.random() < 0.3:
                c["limit"] = 1
        elif roll < 0.49:
            c = dict(type=rng.choice(["graph_list", "graph_get_meta"]), **scope, **asof)
            if c["type"] == "graph_get_meta":
                c["graph"] = "g"
        elif roll < 0.57:
            c = dict(type="event_append", event_type=rng.choice(["a", "b"]), payload={"n": n}, **scope)
            save = True
        elif roll < 0.61:
            c = dict(type=rng.choice(["event_get", "event_exists"]), sequence=rng.choice([0, 1, 2, 5]), **scope)
            if c["type"] == "event_get":
                c.update(asof)
        elif roll < 0.65:
            c = dict(type=rng.choice(["event_count", "event_list", "event_list_types"]), **scope, **asof)
        elif roll < 0.69 and stamps:
            c = dict(type="event_range_by_time", start_ts=f"$w{rng.choice(stamps)}",
                     direction=rng.choice(["forward", "reverse"]), **scope)
            if rng.random() < 0.5:
                c["end_ts"] = f"$w{rng.choice(stamps)}"
            if rng.random() < 0.3:
                c["limit"] = 1
        elif roll < 0.72:
            c = dict(type="json_set", key="d", path="$", value={"n": n}, **scope)
            save = True
        elif roll < 0.76 and len(branches) < 5:
            name = f"b{n}"
            k = rng.random()
            if k < 0.2:
                c = dict(type="branch_create", branch=name)
            elif k < 0.4 and stamps:
                c = dict(type="branch_fork_at_timestamp", source=br, branch=name, timestamp=f"$t{rng.choice(stamps)}")
            elif k < 0.5 and stamps:
                c = dict(type="branch_fork_at_version", source=br, branch=name, version=f"$t{rng.choice(stamps)}")
            else:
                c = dict(type="branch_fork_current", source=br, branch=name)
            branches.append(name)
        elif roll < 0.78 and len(branches) > 1:
            victim = rng.choice(branches[1:])
            c = dict(type="branch_delete", branch=victim)
            if rng.random() < 0.7:
                branches.remove(victim)
        elif roll < 0.88 and len(branches) > 1:
            a, b = rng.sample(branches, 2)
            c = dict(type=rng.choice(["branch_merge", "branch_merge", "branch_preview", "branch_diff"]))
            if c["type"] == "branch_diff":
                c.update(branch_a=a, branch_b=b)
            else:
                c.update(source=a, target=b)
                if rng.random() < 0.5:
                    c["strategy"] = rng.choice(["source_wins", "strict", "last_writer_wins"])
        elif roll < 0.91:
            c = dict(type=rng.choice(["branch_list", "space_list", "event_verify_chain"]),
                     **({} if rng.random() < 0.5 else scope))
            if c["type"] == "branch_list":
                c = dict(type="branch_list")
            if c["type"] == "space_list":
                c.pop("space", None)
        elif roll < 0.95:
            c = dict(type="graph_wcc", graph="g", **scope, **asof)
        else:
            c = dict(type="json_get", key="d", path="$", **scope, **asof)
        step = cmd(**c)
        if save:
            step = (*step, {f"t{n}": "data.commit.timestamp", f"w{n}": "data.commit.committed_at"})
            stamps.append(n)
        script.append(step)
    for b in branches:
        script.append(cmd(type="graph_list_nodes", graph="g", **({} if b == "default" else {"branch": b})))
        script.append(cmd(type="event_list", **({} if b == "default" else {"branch": b})))
    return script


def random_history_script(seed: int, steps: int) -> list:
    """KV, documents and vectors written and deleted on forks that are promoted (both
    strategies) and deleted, a space deleted under them, with the history, listing and
    scan commands read at the head and as of earlier commits and instants."""
    rng = random.Random(seed)
    script = [cmd(type="vector_create_collection", collection="c", dimension=2, metric="cosine")]
    branches = ["default"]
    stamps: list[int] = []
    for n in range(steps):
        br, scope, asof = _scope_and_asof(rng, branches, stamps, 0.7)
        r = rng.random()
        save = False
        k = rng.choice(KEYS)
        if r < 0.14:
            c = dict(type="kv_put", key=b64(k), value=b64(f"v{n}"), **scope)
            save = True
        elif r < 0.18:
            c = dict(type="kv_delete", key=b64(k), **scope)
        elif r < 0.25:
            c = dict(type="json_set", key=k, path=rng.choice(["$", "$.x"]), value=rng.choice([n, {"q": n}]),
                     **scope)
            save = True
        elif r < 0.28:
            c = dict(type="json_delete", key=k, path="$", **scope)
        elif r < 0.34:
            s2 = {kk: v for kk, v in scope.items() if kk != "space"}
            c = dict(type="vector_upsert", collection="c", key=k, vector=rng.choice([[1, 0], [0, 1], [1, 1]]),
                     **s2)
            save = True
        elif r < 0.36:
            s2 = {kk: v for kk, v in scope.items() if kk != "space"}
            c = dict(type="vector_delete", collection="c", key=k, **s2)
        elif r < 0.44:
            c = dict(type="kv_history", key=b64(k), **scope)
            if rng.random() < 0.3:
                c["limit"] = 1
        elif r < 0.50:
            c = dict(type="json_history", key=k, **scope)
        elif r < 0.55:
            s2 = {kk: v for kk, v in scope.items() if kk != "space"}
            c = dict(type="vector_history", collection="c", key=k, **s2)
        elif r < 0.62:
            c = dict(type=rng.choice(["kv_list", "json_list", "kv_count", "json_count"]), **scope, **asof)
        elif r < 0.66:
            c = dict(type="json_get", key=k, path="$", **scope, **asof) if rng.random() < 0.5 \
                else dict(type="kv_get", key=b64(k), **scope, **asof)
        elif r < 0.69:
            s2 = {kk: v for kk, v in scope.items() if kk != "space"}
            c = dict(type="vector_query", collection="c", query=[1, 0.5], k=5, **s2, **asof)
        elif r < 0.74 and len(branches) < 5:
            name = f"b{n}"
            if rng.random() < 0.7 or not stamps:
                c = dict(type="branch_fork_current", source=br, branch=name)
            else:
                c = dict(type="branch_fork_at_version", source=br, branch=name, version=f"$t{rng.choice(stamps)}")
            branches.append(name)
        elif r < 0.76 and len(branches) > 1:
            v = rng.choice(branches[1:])
            c = dict(type="branch_delete", branch=v)
            if rng.random() < 0.7:
                branches.remove(v)
        elif r < 0.86 and len(branches) > 1:
            a, b = rng.sample(branches, 2)
            c = dict(type="branch_merge", source=a, target=b, strategy=rng.choice(["strict", "source_wins"]))
        elif r < 0.9:
            c = dict(type="space_delete", space="s1", force=True, **({} if br == "default" else {"branch": br}))
        else:
            c = dict(type=rng.choice(["kv_scan", "json_scan", "vector_list_keys"]), **scope)
            if c["type"] == "vector_list_keys":
                c.pop("space", None)
                c["collection"] = "c"
        step = cmd(**c)
        if save:
            step = (*step, {f"t{n}": "data.commit.timestamp", f"w{n}": "data.commit.committed_at"})
            stamps.append(n)
        script.append(step)
    return script
