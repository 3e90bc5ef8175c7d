"""Scripts for compatibility defects found by differential testing, one per rule.

Each script runs through MemStrata's server and the real engine side by side
(test_compat.py); a script names the general rule it holds, with the inputs
that showed the difference and their neighbours.
"""

from __future__ import annotations

import base64

B = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
CMD = "strata_command"


def raw(*commands):
    return [(CMD, {"command": c}) for c in commands]


# -- JSON path grammar -------------------------------------------------------------------------

_DOC = {"a": {"b": [1, {"c": 2}]}, "arr": [0, 1, [5, 6]], "s": "str", "a\\b": "BS", "a'b": "Q",
        'a"b': "DQ", "x y": 1, "0": "zero", "\u0345x": "mark"}
# Bracket keys with escapes (a backslash escapes the quote and itself, nothing else), a key straight
# after `$`, a signed index, a dot before a bracket, and the errors next to them.
_PATHS = ["$['a\\\\b']", "$['a\\b']", "$['a\\'b']", '$["a\\"b"]', "$['a\\\"b']", '$["a\\\'b"]', "$['a\\nb']",
          "$['a\\\\']", "$['a\\']", "$['\\']", "$a", "$0", "$a.b[1].c", "$arr[+1]", "$.arr[+1]", "$.arr[++1]",
          "$.arr[-0]", "$.arr[]", "$[] +", "$.[0]", "$.a.[0]", "$['a'].[0]", "$.a..b", "$.a.", ".a", "$.[",
          "$['a'x]", "$['a'", "$[1]]", "$.\u0345x", "$.a\u24b6", "$.a\u0301", "a.b[1]", "$[+0]"]
JSON_PATHS = []
for _p in _PATHS:
    JSON_PATHS += raw({"type": "json_set", "key": "e", "path": "$", "value": _DOC},
                      {"type": "json_get", "key": "e", "path": _p},
                      {"type": "json_set", "key": "e", "path": _p, "value": {"new": 1}},
                      {"type": "json_delete", "key": "e", "path": _p},
                      {"type": "json_get", "key": "e", "path": "$"})

SCRIPTS = {"json_paths": JSON_PATHS}


# -- vector scores -----------------------------------------------------------------------------

# Scores at the ends of f32: a dot product that overflows is written null (ranked by its value,
# a NaN below everything), euclidean and cosine never overflow (the engine works in f64).
_BIG = {"a": [3e38, 3e38], "b": [1, 1], "c": [-3e38, -3e38], "d": [1e-38, 1e-38], "e": [0, 0],
        "f": [3e38, -3e38], "g": [1e20, 1e20]}
VECTOR_SCORES = []
for _metric in ("dot_product", "euclidean", "cosine"):
    VECTOR_SCORES += raw({"type": "vector_create_collection", "collection": _metric, "dimension": 2, "metric": _metric},
                         *({"type": "vector_upsert", "collection": _metric, "key": k, "vector": v}
                           for k, v in _BIG.items()))
    for _q in ([3e38, 3e38], [-3e38, 3e38], [1, 1], [1e-38, 1e-38], [1e20, 1e20]):
        VECTOR_SCORES += raw({"type": "vector_query", "collection": _metric, "query": _q, "k": 10},
                             {"type": "vector_query", "collection": _metric, "query": _q, "k": 2},
                             {"type": "vector_index_query", "collection": _metric, "query": _q, "k": 3})
SCRIPTS["vector_scores"] = VECTOR_SCORES
