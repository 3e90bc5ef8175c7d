"""Scripted and random histories for branch_diff, branch_preview and branch_merge (issue 23).

Forks, concurrent writes to the same key on both sides, deletes against
writes, every primitive, repeated promotions both ways; run through
MemStrata's server and stratadb 1.2.7 by test_merge_commands.py.
"""

from __future__ import annotations

import base64
import random

from .scenarios import cmd


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def put(key, value, **scope):
    return cmd(type="kv_put", key=b64(key), value=b64(value), **scope)


def delete(key, **scope):
    return cmd(type="kv_delete", key=b64(key), **scope)


def diff(a="default", b="f", **extra):
    return cmd(type="branch_diff", branch_a=a, branch_b=b, **extra)


def preview(source="f", target="default", **extra):
    return cmd(type="branch_preview", source=source, target=target, **extra)


def merge(source="f", target="default", **extra):
    return cmd(type="branch_merge", source=source, target=target, **extra)


F = {"branch": "f"}

EVERY_PRIMITIVE = [
    put("k1", "v1"), put("k2", "v2"),
    cmd(type="json_set", key="d1", path="$", value={"a": 1}),
    cmd(type="vector_create_collection", collection="c", dimension=2, metric="cosine"),
    cmd(type="vector_upsert", collection="c", key="v1", vector=[1, 0], metadata={"m": 1}),
    cmd(type="event_append", event_type="t", payload={"x": 1}),
    cmd(type="graph_create", graph="g"),
    cmd(type="graph_add_node", graph="g", node_id="n1"),
    cmd(type="graph_add_node", graph="g", node_id="n2"),
    ("strata_branch_fork", {"source": "default", "branch": "f"}),
    diff(), preview(), merge(),
    put("k1", "F1", **F), put("k3", "F3", **F), delete("k2", **F),
    cmd(type="json_set", key="d1", path="$.b", value=2, **F),
    cmd(type="json_set", key="d2", path="$", value=[1], **F),
    cmd(type="vector_upsert", collection="c", key="v2", vector=[0.1, 0.2], metadata={"z": 1, "a": [1]}, **F),
    cmd(type="vector_create_collection", collection="c2", dimension=3, metric="euclidean", **F),
    cmd(type="event_append", event_type="t", payload={"x": 2}, **F),
    cmd(type="graph_add_node", graph="g", node_id="n3", **F),
    cmd(type="graph_add_edge", graph="g", src="n1", edge_type="e", dst="n2", **F),
    cmd(type="graph_define_object_type", graph="g", name="t", **F),
    put("z", "z", space="s2", **F),
    put("w", "w", space="s3"),
    put("same", "x"), put("same", "x", **F),
    diff(), diff("f", "default"), diff("f", "f"),
    ("strata_command", {"command": {"type": "kv_get", "key": b64("k1")}}, {"mark": "data.value.version"}),
    diff(at_timestamp="$mark"),
    preview(), preview(strategy="source_wins"), preview("default", "f"),
    merge(),
    ("strata_branch_list", {}),
    cmd(type="branch_get", branch="default"),
    diff(),
    cmd(type="kv_get", key=b64("k2")),
    cmd(type="kv_get", key=b64("k3")),
    cmd(type="json_get", key="d1", path="$"),
    cmd(type="vector_count", collection="c"),
    cmd(type="vector_query", collection="c", query=[0.1, 0.2], k=5),
    cmd(type="vector_get", collection="c", key="v2"),
    cmd(type="kv_get", key=b64("z"), space="s2"),
    cmd(type="space_list"),
    preview(), merge(),
    preview("default", "f"), merge("default", "f"),
]

CONFLICTS = [
    *[put(k, "1") for k in "abcde"],
    cmd(type="json_set", key="j", path="$", value={"a": 1}),
    cmd(type="vector_create_collection", collection="col", dimension=2, metric="cosine"),
    cmd(type="vector_upsert", collection="col", key="v", vector=[1, 0]),
    ("strata_branch_fork", {"source": "default", "branch": "f"}),
    # a: both change differently; b: both the same; c: source deletes, target writes;
    # d: both delete; e: target deletes, source writes; n: both create differently.
    put("a", "T"), put("a", "S", **F),
    put("b", "same"), put("b", "same", **F),
    delete("c", **F), put("c", "T"),
    delete("d", **F), delete("d"),
    delete("e"), put("e", "S", **F),
    put("n", "T"), put("n", "S", **F),
    cmd(type="json_set", key="j", path="$.b", value=1),
    cmd(type="json_set", key="j", path="$.c", value=1, **F),
    cmd(type="vector_upsert", collection="col", key="v", vector=[0, 1]),
    cmd(type="vector_upsert", collection="col", key="v", vector=[1, 1], **F),
    put("t_only", "T"),
    preview(), preview(strategy="source_wins"), preview(strategy="zz"),
    merge(), diff(),
    merge(strategy="source_wins"),
    cmd(type="branch_get", branch="default"),
    cmd(type="kv_get", key=b64("c")),
    cmd(type="kv_get", key=b64("e")),
    cmd(type="vector_query", collection="col", query=[1, 1], k=3),
    preview(), merge(),
    preview("default", "f"), merge("default", "f"),
    cmd(type="branch_get", branch="f"),
    diff(),
    # Another round after the promotion: the branch point has moved.
    put("a", "S2", **F), put("a", "T2"),
    preview(), merge(), merge(strategy="source_wins"), preview(),
]

REFUSALS = [
    put("k", "v"),
    cmd(type="branch_create", branch="root"),
    preview("root", "default"), merge("root", "default"), diff("root", "default"),
    ("strata_branch_fork", {"source": "default", "branch": "f"}),
    ("strata_branch_fork", {"source": "f", "branch": "ff"}),
    ("strata_branch_fork", {"source": "default", "branch": "sib"}),
    put("k", "deep", branch="ff"),
    preview("ff", "default"), preview("f", "f"), preview("sib", "f"), preview("ff", "f"), merge("ff", "f"),
    preview("nope", "f"), preview("f", "nope"), merge("", "f"), merge("f", "_x"),
    diff("nope", "f"), diff("", "f"), diff("default", "_b"),
    cmd(type="branch_merge", source="f"), cmd(type="branch_merge", source="f", target="default", zzz=1),
    cmd(type="branch_diff", branch_a="f"), cmd(type="branch_preview", target="f"),
    cmd(type="branch_merge", source="f", target="default", strategy=3),
]

# The engine's rules the random histories first met, each as a minimal history.
RULES = [
    # A fork of a fresh database is taken at its first version.
    ("strata_branch_fork", {"source": "default", "branch": "f"}),
    preview(), cmd(type="branch_get", branch="f"),
    # KV compares bytes: a rewrite to the same value, or a change and back, is no change.
    put("a", "0"), put("r", "0"),
    ("strata_branch_fork", {"source": "default", "branch": "g"}),
    put("a", "0"), put("a", "S", branch="g"),
    put("r", "T"), put("r", "1", branch="g"), put("r", "0", branch="g"),
    preview("g", "default"),
    # Documents compare as records: the same value written on both sides separately
    # differs, and so does a rewrite to the same value.
    cmd(type="json_set", key="d", path="$", value={"a": 1}),
    cmd(type="json_set", key="d", path="$", value={"a": 1}, branch="g"),
    diff("default", "g"), preview("g", "default"),
    # Vectors compare by embedding, metadata and revision.
    cmd(type="vector_create_collection", collection="c", dimension=2, metric="cosine"),
    cmd(type="vector_upsert", collection="c", key="same", vector=[1, 0]),
    cmd(type="vector_upsert", collection="c", key="same", vector=[1, 0], branch="g"),
    diff("default", "g"),
    merge("g", "default", strategy="source_wins"),
    # A promoted document is the source's record: no difference is left.
    diff("default", "g"),
    # The version after a promotion's commit is on the target's timeline.
    ("strata_command", {"command": {"type": "kv_get", "key": b64("a")}}, {"m": "data.value.version"}),
    cmd(type="branch_get", branch="default"),
    ("strata_branch_fork", {"source": "default", "branch": "h"}),
    put("a", "H", branch="h"),
    cmd(type="vector_delete", collection="c", key="same", branch="h"),
    cmd(type="json_set", key="d", path="$.h", value=1, branch="h"),
    # A promotion from another source puts g's branch point back at its fork.
    preview("g", "default"), merge("h", "default"), preview("g", "default"),
    # A vector deleted by a promotion keeps its revision counter.
    cmd(type="vector_upsert", collection="c", key="same", vector=[0, 1]),
    cmd(type="json_get", key="d", path="$"),
    cmd(type="json_history", key="d"),
    diff("default", "h"),
]

# Rules found by random histories of graphs, events, spaces and branch lifecycles (below).
def _node(node_id, **scope):
    return cmd(type="graph_add_node", graph="g", node_id=node_id, **scope)


def _unnode(node_id, **scope):
    return cmd(type="graph_remove_node", graph="g", node_id=node_id, **scope)


SPACES_TRAVEL = [
    put("k", "v"), ("strata_branch_fork", {"source": "default", "branch": "f"}),
    # A space the target lacks travels with a promotion, and that alone makes a commit:
    # one made by space_create, by a write (even one deleted since) or by an event.
    cmd(type="space_create", space="s2"),
    cmd(type="kv_put", key=b64("x"), value=b64("1"), space="s3"), cmd(type="kv_delete", key=b64("x"), space="s3"),
    cmd(type="event_append", event_type="t", payload={}, space="s4"),
    preview("default", "f"), merge("default", "f"),
    cmd(type="space_list", branch="f"), cmd(type="branch_get", branch="f"),
    # ... and the branch point moves to it, so the next promotion starts there.
    put("k", "w"), merge("default", "f"), cmd(type="space_list", branch="f"),
    # A space the target already has, or one deleted on the source, does not.
    cmd(type="space_create", space="s5"), cmd(type="space_create", space="s5", branch="f"),
    cmd(type="space_create", space="s6"), cmd(type="space_delete", space="s6", force=True),
    merge("default", "f"), cmd(type="branch_get", branch="f"),
    # Deleting a promotion's target still describes the last promotion into it.
    cmd(type="branch_delete", branch="f"),
]

FORK_ANCHORS = [
    put("k", "1"), put("k", "2"),
    cmd(type="branch_create", branch="c"), put("k", "3"),
    ("strata_branch_fork", {"source": "default", "branch": "f"}),
    put("k", "4", branch="c"), put("k", "5", branch="f"), put("k", "6"),
    # A branch's creation version is no anchor for a fork of it, by version or by time; an
    # empty root's history starts after it (earlier versions are outside the branch).
    *[cmd(type="branch_fork_at_version", source=src, branch=f"v{src}{v}", version=v)
      for src in ("c", "f", "default") for v in range(0, 13)],
    *[cmd(type="branch_fork_at_timestamp", source=src, branch=f"t{src}{v}", timestamp=v)
      for src in ("c", "f") for v in range(0, 13)],
    cmd(type="branch_list"),
]

GRAPH_RECORDS = [
    cmd(type="graph_create", graph="g"), ("strata_branch_fork", {"source": "default", "branch": "f"}),
    # A graph record written back to its old counts differs from a fresh one ...
    _node("a", **F), _unnode("a", **F), diff(), diff("f", "default"),
    # ... and from nothing once both sides rewrote it.
    _node("b"), _unnode("b"), diff(),
    # Graphs created apart compare equal until written, then by where each was created.
    cmd(type="graph_create", graph="h"), cmd(type="graph_create", graph="h", **F), diff(),
    cmd(type="graph_add_node", graph="h", node_id="a"), cmd(type="graph_add_node", graph="h", node_id="a", **F),
    diff(),
]

def _vec(key, vector, **scope):
    return cmd(type="vector_upsert", collection="c", key=key, vector=vector, **scope)


def _gone(steps_on_source: list, steps_on_target: list, pre: list = ()) -> list:
    """A fork, then changes on each side, a promotion into the fork, and what it left there."""
    return [cmd(type="vector_create_collection", collection="c", dimension=2, metric="cosine"), *pre,
            ("strata_branch_fork", {"source": "default", "branch": "f"}), *steps_on_source, *steps_on_target,
            preview("default", "f"), merge("default", "f", strategy="source_wins"),
            cmd(type="vector_list_collections", **F), cmd(type="vector_list_keys", collection="c", **F),
            cmd(type="space_list", **F), cmd(type="kv_list", space="s1", **F)]


_DROP_C = cmd(type="vector_delete_collection", collection="c", force=True)
_DROP_S1 = cmd(type="space_delete", space="s1", force=True)
_S1 = {"space": "s1"}

# What the source removed since the branch point goes on the target when the promotion leaves
# it empty there (a collection, a space: the merge's spaces_covered is then the source's and
# the target's as left), and stays while the target still holds something in it.  One fresh
# database each.
CONTAINERS_GONE = [
    _gone([_DROP_C], []),
    _gone([_DROP_C], [], pre=[_vec("a", [1, 0])]),
    _gone([_DROP_C], [_vec("b", [0, 1], **F)], pre=[_vec("a", [1, 0])]),
    _gone([_DROP_C], [_vec("a", [0, 1], **F)], pre=[_vec("a", [1, 0])]),
    # a collection made again (another dimension) replaces the target's emptied one
    _gone([_DROP_C, cmd(type="vector_create_collection", collection="c", dimension=3, metric="cosine")], [],
          pre=[_vec("a", [1, 0])]),
    _gone([_DROP_S1], [], pre=[put("k", "v", **_S1)]),
    _gone([_DROP_S1], [put("k2", "x", **_S1, **F)], pre=[put("k", "v", **_S1)]),
    _gone([_DROP_S1], [cmd(type="event_append", event_type="e", payload={}, **_S1, **F)], pre=[put("k", "v", **_S1)]),
    _gone([_DROP_S1], [], pre=[put("k", "v", **_S1), cmd(type="graph_create", graph="g", **_S1)]),
    _gone([_DROP_S1, put("y", "2", **_S1)], [], pre=[put("k", "v", **_S1)]),
]

SCRIPTS = {"merge_every_primitive": EVERY_PRIMITIVE, "merge_conflicts": CONFLICTS, "merge_refusals": REFUSALS,
           "merge_rules": RULES, "merge_spaces_travel": SPACES_TRAVEL, "fork_anchors": FORK_ANCHORS,
           "diff_graph_records": GRAPH_RECORDS,
           **{f"merge_containers_gone_{i}": script for i, script in enumerate(CONTAINERS_GONE)}}

KEYS = ["a", "b", "c", "d"]


def random_merge_script(seed: int, steps: int) -> list:
    """Writes and deletes on a parent and its forks, with diffs, previews and promotions both ways."""
    rng = random.Random(seed)
    script: list = [cmd(type="vector_create_collection", collection="c", dimension=2, metric="cosine")]
    branches = ["default"]
    forks: list[tuple[str, str]] = []  # (child, parent)
    for n in range(steps):
        branch = rng.choice(branches)
        scope = {} if branch == "default" else {"branch": branch}
        if rng.random() < 0.2:
            scope["space"] = "s1"
        roll = rng.random()
        if roll < 0.3:
            step = put(rng.choice(KEYS), rng.choice(["x", "y", f"v{n}"]), **scope)
        elif roll < 0.4:
            step = delete(rng.choice(KEYS), **scope)
        elif roll < 0.5:
            step = cmd(type="json_set", key=rng.choice(KEYS), path=rng.choice(["$", "$.f"]),
                       value=rng.choice([1, {"q": n}, "s"]), **scope)
        elif roll < 0.55:
            step = cmd(type="json_delete", key=rng.choice(KEYS), path="$", **scope)
        elif roll < 0.6:
            # A second collection, created on whichever branch comes first (it travels with promotions).
            step = cmd(type="vector_create_collection", collection="c2", dimension=2, metric="cosine", **scope) \
                if rng.random() < 0.3 else cmd(type="vector_upsert", collection="c2", key=rng.choice(KEYS),
                                                vector=[1, 0], **scope)
        elif roll < 0.63:
            scope.pop("space", None)
            step = cmd(type="vector_upsert", collection="c", key=rng.choice(KEYS),
                       vector=rng.choice([[1, 0], [0, 1], [0.5, 0.25]]), **scope)
        elif roll < 0.66:
            scope.pop("space", None)
            step = cmd(type="vector_delete", collection="c", key=rng.choice(KEYS), **scope)
        elif roll < 0.7 and len(branches) < 4:
            name = f"b{n}"
            step = ("strata_branch_fork", {"source": branch, "branch": name})
            forks.append((name, branch))
            branches.append(name)
        elif forks and roll < 0.9:
            child, parent = rng.choice(forks)
            source, target = (child, parent) if rng.random() < 0.6 else (parent, child)
            wire = rng.choice(["branch_preview", "branch_merge", "branch_merge"])
            step = cmd(type=wire, source=source, target=target,
                       **rng.choice([{}, {"strategy": "source_wins"}, {"strategy": "strict"}]))
        else:
            a, b = rng.sample(branches, 2) if len(branches) > 1 else ("default", "default")
            step = cmd(type="branch_diff", branch_a=a, branch_b=b)
        script.append(step)
    for b in branches:
        script.append(cmd(type="kv_list", branch=b))
        script.append(cmd(type="vector_query", collection="c", query=[1, 1], k=10, branch=b))
    return script
