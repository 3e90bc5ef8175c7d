"""Seeded random wire commands with odd field values, for the engine's check order.

Every command family except those this server does not run (arrow, inference,
embedding, import/export, configuration and maintenance) with each field given
a plausible or an implausible value; run through both engines by
test_differential.py.  It found the check orders of reads, listings and single
vectors (docs/strata.md).
"""

from __future__ import annotations

import random

from memstrata.strata.wire import SPECS

from .scenarios import cmd

# Families this server does not run, and maintenance commands.
EXCLUDE = ("arrow", "infer", "embed", "import", "export", "config", "flush", "compact", "admin", "retention", "gc",
           "snapshot", "backup")
COMMANDS = sorted(w for w in SPECS if not any(x in w for x in EXCLUDE))
GOOD = {
    "branch": ["default", "f", "nope", "", "_x"], "space": ["default", "s1", "", "_bad"],
    "key": ["azE=", "", "!!", "aw=="], "value": ["dg==", ""], "graph": ["g", "", "nope"],
    "collection": ["c", "", "nope"], "node_id": ["a", "b", ""], "src": ["a", "b"], "dst": ["a", "b"],
    "edge_type": ["e", ""], "event_type": ["t", ""], "path": ["$", "$.x", "x", "$[0]"],
    "direction": ["outgoing", "incoming", "both", "forward", "reverse", "sideways"],
    "metric": ["cosine", "euclidean", "dot_product", "l1"],
}
NUMBERS = ("limit", "k", "dimension", "sequence", "version", "timestamp", "as_of", "as_of_time", "count", "max_depth",
           "start_seq", "end_seq", "start_ts", "end_ts", "chunk_size", "max_iterations", "max_nodes")
POOL = [None, 0, 1, -1, 2**64, 2.5, "x", "", [], [1], {}, {"a": 1}, True]


def _value_for(name: str, rng: random.Random):
    if name in GOOD and rng.random() < 0.75:
        return rng.choice(GOOD[name])
    if name in NUMBERS:
        return rng.choice([0, 1, 2, 3, 5, 100, 10**6, -1, 2.5, None, "1"])
    if name in ("vector", "query"):
        return rng.choice([[1, 0], [0.5, 0.5], [1, 2, 3], [], "x", [None], [1e39, 0]])
    if name in ("payload", "properties", "metadata", "patch"):
        return rng.choice([{}, {"a": 1}, [1], None, "s", 1, {"n": None}])
    return rng.choice(POOL)


def random_field_script(seed: int, steps: int) -> list:
    """Wire commands of every family with plausible and implausible field values: names empty,
    reserved or unknown, numbers out of range or of the wrong type, nulls, missing required
    fields and unknown ones, on a database with a graph, a node, a collection and a fork."""
    rng = random.Random(seed)
    script = [cmd(type="graph_create", graph="g"), cmd(type="graph_add_node", graph="g", node_id="a"),
              cmd(type="vector_create_collection", collection="c", dimension=2, metric="cosine"),
              ("strata_branch_fork", {"source": "default", "branch": "f"})]
    for n in range(steps):
        w = rng.choice(COMMANDS)
        spec = SPECS[w]
        args = {"type": w}
        for f in spec.fields:
            if f.required or rng.random() < 0.35:
                if rng.random() < 0.05 and f.required:
                    continue  # missing required
                args[f.name] = _value_for(f.name, rng)
        if rng.random() < 0.05:
            args["zzz"] = 1
        script.append(cmd(**args))
    return script
