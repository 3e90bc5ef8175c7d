"""Extra random steps for the commands past the curated tools (issue 23).

Drawn from a generator of their own, so that the base histories of
random_scripts.py stay what they were and these steps land between them.
"""

from __future__ import annotations

import base64
import random

KEYS = ["a", "b", "c", "app:1", "app:2", "z"]
DOCS = ["d1", "d2"]
PATHS = ["$", "$.x", "$.y.z", "$.list"]


def _b(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def extra_step(rng: random.Random, n: int, scope: dict, as_of: dict):
    """One wire command as a strata_command step, or None (most of the time)."""
    if rng.random() > 0.3:
        return None
    keys = rng.sample(KEYS, rng.choice([1, 2, 3]))
    roll = rng.random()
    if roll < 0.10:
        c = {"type": "kv_batch_put", "entries": [{"key": _b(k), "value": _b(f"v{n}")} for k in keys]}
        if rng.random() < 0.2:
            c["entries"].append({"key": "", "value": _b("x")})
        if rng.random() < 0.2:
            c["space"] = "s9"
            return ("strata_command", {"command": c})
    elif roll < 0.16:
        c = {"type": rng.choice(["kv_batch_get", "kv_batch_exists", "kv_batch_delete"]),
             "keys": [_b(k) for k in keys]}
    elif roll < 0.26:
        c = {"type": "json_batch_set", "entries": [{"key": rng.choice(DOCS), "path": p,
                                                     "value": rng.choice([n, {"k": n}, [n], None])}
                                                    for p in rng.sample(PATHS, rng.choice([1, 2]))]}
    elif roll < 0.32:
        c = {"type": rng.choice(["json_batch_get", "json_batch_delete"]),
             "entries": [{"key": d, "path": rng.choice(PATHS)} for d in rng.sample(DOCS, rng.choice([1, 2]))]}
        if c["type"] == "json_batch_get":
            c.update(as_of)
    elif roll < 0.42:
        coll, dim = rng.choice([("vc", 3), ("ve", 2)])
        c = {"type": "vector_batch_upsert", "collection": coll, "entries": [
            {"key": k, "vector": [rng.choice([0, 1, -1, 0.5]) for _ in range(dim)],
             "metadata": rng.choice([None, {"g": rng.choice(["x", "y"])}])} for k in keys]}
    elif roll < 0.48:
        c = {"type": rng.choice(["vector_batch_delete", "vector_batch_get", "vector_batch_exists"]),
             "collection": rng.choice(["vc", "ve"]), "keys": keys}
    elif roll < 0.53:
        c = {"type": "vector_update_metadata", "collection": rng.choice(["vc", "ve"]), "key": keys[0],
             "patch": {"g": rng.choice(["x", "y", None])}}
    elif roll < 0.56:
        c = {"type": "vector_delete_by_filter", "collection": "vc", "filter": {"conditions": [
            {"field": "g", "op": "eq", "value": {"type": "string", "value": "y"}}]}}
    elif roll < 0.63:
        c = {"type": rng.choice(["vector_list_keys", "vector_scan", "vector_sample", "vector_history"]),
             "collection": rng.choice(["vc", "ve"])}
        if c["type"] == "vector_history":
            c["key"] = keys[0]
        elif c["type"] != "vector_sample":
            c["limit"] = rng.choice([1, 2, 10])
    elif roll < 0.73:
        c = {"type": "event_batch_append", "entries": [{"event_type": rng.choice(["a", "b", "c"]), "payload": {"n": n}}
                                                        for _ in range(rng.choice([1, 2, 3]))]}
        if rng.random() < 0.3:
            # Events in the space space_delete removes: its log restarts at 0.
            c["space"] = "s9"
            return ("strata_command", {"command": c})
    elif roll < 0.83:
        c = {"type": "event_range", "start_seq": rng.choice([0, 1, 3]), "direction": rng.choice(["forward", "reverse"]),
             "limit": rng.choice([None, 1, 3])}
        if rng.random() < 0.5:
            c["end_seq"] = rng.choice([2, 5])
        if rng.random() < 0.3:
            c["event_type"] = rng.choice(["a", "b"])
    elif roll < 0.88:
        c = {"type": rng.choice(["event_list_types", "event_count", "event_verify_chain"]), **as_of}
        if rng.random() < 0.4:
            c["space"] = "s9"
            return ("strata_command", {"command": {**c, **{k: v for k, v in scope.items() if k != "space"}}})
    elif roll < 0.93:
        c = {"type": rng.choice(["kv_sample", "json_scan", "json_sample", "describe"])}
    else:
        return ("strata_command", {"command": {"type": "space_delete", "space": "s9",
                                               "force": rng.random() < 0.7, **({"branch": scope["branch"]}
                                                                               if "branch" in scope else {})}})
    return ("strata_command", {"command": {**c, **scope}})
