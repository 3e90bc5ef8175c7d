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


# -- names and ids -----------------------------------------------------------------------------

# Every kind of name with whitespace-only text (Rust's White_Space, not Python's), control bytes
# (each kind refuses C0+DEL+C1, NUL and LF, or NUL alone), lengths around its limit, and two
# faults at once (which check comes first).
_NAME_KINDS = {
    "space": lambda x: {"type": "kv_put", "key": B("k"), "value": B("v"), "space": x},
    "json_id": lambda x: {"type": "json_set", "key": x, "path": "$", "value": 1},
    "index": lambda x: {"type": "json_create_index", "name": x, "field_path": "$.a", "index_type": "tag"},
    "event_type": lambda x: {"type": "event_append", "event_type": x, "payload": {}},
    "collection": lambda x: {"type": "vector_create_collection", "collection": x, "dimension": 1, "metric": "cosine"},
    "vector_key": lambda x: {"type": "vector_upsert", "collection": "c", "key": x, "vector": [1.0]},
    "graph": lambda x: {"type": "graph_create", "graph": x},
    "node": lambda x: {"type": "graph_add_node", "graph": "g", "node_id": x},
    "edge_type": lambda x: {"type": "graph_add_edge", "graph": "g", "src": "n", "edge_type": x, "dst": "n"},
    "object_type": lambda x: {"type": "graph_define_object_type", "graph": "g", "name": x},
    "link_source": lambda x: {"type": "graph_define_link_type", "graph": "g", "name": "l", "source": x, "target": "n"},
    "node_object_type": lambda x: {"type": "graph_add_node", "graph": "g", "node_id": "m", "object_type": x},
    "property": lambda x: {"type": "graph_define_object_type", "graph": "g", "name": "o",
                           "properties": {x: {"value_type": "string"}}},
    "branch": lambda x: {"type": "branch_create", "branch": x},
}
_NAME_INPUTS = [" ", "\t", "\n", "\r", "\x0b", "\x85", "\xa0", "\u2000", "\u2028", "\u3000", " \t\u3000", "\x1c", "\x1f",
                "\u200b", "a\x00", "a\n", "a\t", "a\x01", "a\x7f", "a\x80", "a\x9f", "a\xa0", "a" * 255, "a" * 256,
                "a" * 257, "a" * 1024, "a" * 1025, "a" * 65536, " " * 300, "a" * 300 + "\x00", "_\x00", "_" + "a" * 300,
                "a/\x00", "a/" + "a" * 300, "_/", " \x00", " \x01", "_ ", "_x", "a/b"]
NAMES = raw({"type": "graph_create", "graph": "g"}, {"type": "graph_add_node", "graph": "g", "node_id": "n"},
            {"type": "vector_create_collection", "collection": "c", "dimension": 1, "metric": "cosine"},
            *(make(x) for make in _NAME_KINDS.values() for x in _NAME_INPUTS))
SCRIPTS["names"] = NAMES


# -- sizes -------------------------------------------------------------------------------------

# One encoded value past 16 MiB: a JSON document, an event payload, vector metadata and graph
# properties as their compact JSON (escapes counted as written); a KV row as the engine frames it.
_MIB16 = 16 << 20
SIZES = raw({"type": "kv_put", "key": B("big2"), "value": B("v" * _MIB16)},
            {"type": "kv_put", "key": B("k"), "value": B("v" * (_MIB16 - 74)), "space": "s"},
            {"type": "kv_put", "key": B("k"), "value": B("v" * (_MIB16 - 73))},
            {"type": "kv_put", "key": B("k\x00"), "value": B("v" * (_MIB16 - 74))},
            {"type": "json_set", "key": "j", "path": "$", "value": "v" * _MIB16},
            {"type": "json_set", "key": "j", "path": "$", "value": "v" * (_MIB16 - 1)},
            {"type": "json_set", "key": "j", "path": "$", "value": "\u00e9" * (_MIB16 // 2)},
            {"type": "json_set", "key": "j", "path": "$", "value": {"a": "v" * (_MIB16 // 2)}},
            {"type": "json_set", "key": "j", "path": "$.b", "value": "v" * (_MIB16 // 2)},
            {"type": "event_append", "event_type": "e", "payload": {"a": "v" * _MIB16}},
            {"type": "event_append", "event_type": "e", "payload": {"a": "\x01" * (_MIB16 // 6)}},
            {"type": "event_append", "event_type": "", "payload": {"a": "v" * _MIB16}},
            {"type": "vector_create_collection", "collection": "c", "dimension": 1, "metric": "cosine"},
            {"type": "vector_upsert", "collection": "c", "key": "k", "vector": [1.0], "metadata": {"a": "v" * _MIB16}},
            {"type": "graph_create", "graph": "g"},
            {"type": "graph_add_node", "graph": "g", "node_id": "n", "properties": {"a": "v" * _MIB16}},
            {"type": "graph_add_edge", "graph": "g", "src": "n", "dst": "n", "edge_type": "e",
             "properties": {"a": "v" * _MIB16}})
SCRIPTS["sizes"] = SIZES


# -- names on reads ----------------------------------------------------------------------------

# Reads and non-creating commands hold names, ids and cursors to the rules writes use: a bad one is
# refused, never "not found" or an empty page.
_BAD = ["", " ", "a" * 300, "a\x00", "_x", "a/b"]
_READS = []
for _x in _BAD:
    for _t in ("graph_delete", "graph_get_meta", "graph_list_nodes", "graph_sample", "graph_wcc", "graph_get_ontology"):
        _READS.append({"type": _t, "graph": _x})
    _READS += [{"type": "graph_get_node", "graph": _x, "node_id": "n"},
               {"type": "graph_neighbors", "graph": _x, "node_id": "n", "direction": "both"}]
    for _t in ("vector_count", "vector_delete_collection", "vector_collection_stats", "vector_list_keys"):
        _READS.append({"type": _t, "collection": _x})
    _READS += [{"type": "vector_get", "collection": _x, "key": "k"}, {"type": "vector_delete", "collection": _x, "key": "k"},
               {"type": "vector_query", "collection": _x, "query": [1.0], "k": 1},
               {"type": "graph_get_node", "graph": "g", "node_id": _x}, {"type": "graph_remove_node", "graph": "g", "node_id": _x},
               {"type": "graph_get_edge", "graph": "g", "src": _x, "edge_type": "e", "dst": "n"},
               {"type": "graph_get_edge", "graph": "g", "src": "n", "edge_type": _x, "dst": "n"},
               {"type": "graph_remove_edge", "graph": "g", "src": "n", "edge_type": _x, "dst": "n"},
               {"type": "graph_neighbors", "graph": "g", "node_id": _x, "direction": "both"},
               {"type": "graph_neighbors", "graph": "g", "node_id": "n", "direction": "both", "edge_type": _x},
               {"type": "event_list", "event_type": _x}, {"type": "kv_get", "key": B("k"), "space": _x},
               {"type": "json_get", "key": "d", "path": "$", "space": _x}, {"type": "describe", "space": _x},
               {"type": "json_get", "key": _x, "path": "$"}, {"type": "json_delete", "key": _x, "path": "$"},
               {"type": "kv_list", "cursor": B(_x), "limit": 5}, {"type": "kv_scan", "start": B(_x)},
               {"type": "graph_list", "cursor": _x}, {"type": "graph_list_nodes", "graph": "g", "cursor": _x},
               {"type": "json_list", "cursor": _x}, {"type": "vector_list_keys", "collection": "c", "cursor": _x},
               {"type": "branch_get", "branch": _x}]
READS = raw({"type": "graph_create", "graph": "g"}, {"type": "graph_add_node", "graph": "g", "node_id": "n"},
            {"type": "vector_create_collection", "collection": "c", "dimension": 1, "metric": "cosine"},
            {"type": "json_set", "key": "d", "path": "$", "value": 1}, *_READS,
            ) + [("strata_graph_neighbors", {"graph": "g", "node_id": "", "direction": "both"}),
                 ("strata_graph_neighbors", {"graph": "g", "node_id": "n", "edge_type": " "}),
                 ("strata_event_list", {"event_type": ""}), ("strata_event_list", {"event_type": "t" * 300}),
                 ("strata_kv_list", {"prefix": "a", "space": "a\x00"})]
SCRIPTS["reads"] = READS


# -- health ------------------------------------------------------------------------------------

# Health on a branch that is missing or deleted is a report (unhealthy, no space catalog), not an
# error; a bad branch name is still refused.
SCRIPTS["health"] = raw({"type": "health", "branch": "x"}, {"type": "health", "branch": ""},
                        {"type": "health", "branch": "a" * 300}, {"type": "health", "branch": "_x"},
                        {"type": "health"}, {"type": "branch_create", "branch": "b"},
                        {"type": "health", "branch": "b"}, {"type": "health", "branch": "x"},
                        {"type": "branch_delete", "branch": "b"}, {"type": "health", "branch": "b"},
                        {"type": "health", "branch": "default"})


# -- branch generations ------------------------------------------------------------------------

# A branch created again under a deleted one's name starts at state revision 1 (a fork onto that
# name at 0), and its deletion counts from there.
SCRIPTS["branch_generations"] = raw(
    {"type": "kv_put", "key": B("k"), "value": B("v")},
    {"type": "branch_create", "branch": "f"}, {"type": "branch_delete", "branch": "f"},
    {"type": "branch_create", "branch": "f"}, {"type": "branch_get", "branch": "f"},
    {"type": "kv_put", "key": B("k"), "value": B("v"), "branch": "f"}, {"type": "branch_get", "branch": "f"},
    {"type": "branch_delete", "branch": "f"}, {"type": "branch_fork_current", "source": "default", "branch": "f"},
    {"type": "branch_get", "branch": "f"}, {"type": "branch_delete", "branch": "f"},
    {"type": "branch_create", "branch": "f"}, {"type": "branch_delete", "branch": "f"},
    {"type": "branch_create", "branch": "f"}, {"type": "branch_list"},
    {"type": "branch_fork_current", "source": "f", "branch": "g"}, {"type": "branch_get", "branch": "g"},
    {"type": "branch_delete", "branch": "g"}, {"type": "branch_fork_current", "source": "f", "branch": "g"},
    {"type": "kv_put", "key": B("k"), "value": B("w"), "branch": "g"}, {"type": "branch_delete", "branch": "g"})


# -- retained history --------------------------------------------------------------------------

# A read anchored at a version (as_of, a diff's at_timestamp) must fall inside the branch's retained
# timeline: from the version after an empty root's creation (a fork reaches back through its
# parent; the default branch from the first commit) to the branch's latest commit.  A diff checks
# its first branch, then its second.
_AT = range(0, 17)
_DIFF = lambda a, b, t: {"type": "branch_diff", "branch_a": a, "branch_b": b, "at_timestamp": t}  # noqa: E731
RETAINED = raw({"type": "branch_diff", "branch_a": "default", "branch_b": "b", "at_timestamp": 0},
               {"type": "branch_create", "branch": "b"}, *(_DIFF("default", "b", t) for t in (0, 1, 2, 3, 100)),
               {"type": "branch_create", "branch": "c"},
               {"type": "kv_put", "key": B("k"), "value": B("v"), "branch": "b"},
               {"type": "kv_put", "key": B("k"), "value": B("v"), "branch": "c"},
               {"type": "kv_put", "key": B("k"), "value": B("w"), "branch": "b"},
               {"type": "branch_fork_current", "source": "b", "branch": "f"},
               *(x for t in _AT for x in (_DIFF("b", "c", t), _DIFF("c", "b", t), _DIFF("b", "f", t),
                                          _DIFF("default", "c", t),
                                          {"type": "kv_get", "key": B("k"), "branch": "c", "as_of": t},
                                          {"type": "kv_get", "key": B("k"), "branch": "f", "as_of": t},
                                          {"type": "event_count", "branch": "b", "as_of": t},
                                          {"type": "kv_get", "key": B("k"), "as_of": t})),
               _DIFF("b", "c", 2 ** 63), _DIFF("x", "b", 0))
SCRIPTS["retained_history"] = RETAINED


# -- check order -------------------------------------------------------------------------------

# The engine judges a command's own names (graph, collection, event type, node id, JSON index) when
# it reads the command, before the branch and space names and before any lookup; an empty
# delete filter once the branch is found, before the space and collection; a fork's source name
# before its new name, both before either branch is looked up.
_ORDER = [({"type": "graph_get_meta"}, "graph"), ({"type": "graph_create"}, "graph"),
          ({"type": "graph_get_node", "graph": "g"}, "node_id"), ({"type": "graph_add_node", "graph": "g"}, "node_id"),
          ({"type": "graph_neighbors", "graph": "g", "direction": "both"}, "node_id"),
          ({"type": "vector_count"}, "collection"), ({"type": "vector_delete_collection"}, "collection"),
          ({"type": "vector_create_collection", "dimension": 1, "metric": "cosine"}, "collection"),
          ({"type": "vector_query", "query": [1.0], "k": 1}, "collection"),
          ({"type": "vector_delete_by_filter", "filter": {"conditions": []}}, "collection"),
          ({"type": "event_list"}, "event_type"), ({"type": "event_append", "payload": {}}, "event_type"),
          ({"type": "json_create_index", "field_path": "$.a", "index_type": "tag"}, "name"),
          ({"type": "json_drop_index"}, "name")]
_SCOPES = [{"branch": "zz"}, {"space": ""}, {"space": "_x"}, {"branch": ""}, {"space": "zz"},
           {"branch": "zz", "space": ""}, {"branch": "", "space": "zz"}]
CHECK_ORDER = raw({"type": "graph_create", "graph": "g"}, {"type": "graph_add_node", "graph": "g", "node_id": "n"},
                  {"type": "vector_create_collection", "collection": "c", "dimension": 1, "metric": "cosine"},
                  *(dict(base, **{field: ""}, **scope) for base, field in _ORDER for scope in _SCOPES),
                  *({"type": "vector_delete_by_filter", "collection": "c", "filter": {"conditions": []}, **scope}
                    for scope in _SCOPES),
                  {"type": "branch_create", "branch": "nb"},
                  *({"type": t, "source": s, "branch": br, **extra}
                    for t, extra in (("branch_fork_current", {}), ("branch_fork_at_version", {"version": 0}),
                                     ("branch_fork_at_timestamp", {"timestamp": 0}))
                    for s, br in (("", "nb"), ("a" * 300, "nb"), ("zz", "nb"), ("a" * 300, ""), ("", "a" * 300),
                                  ("zz", ""), ("_x", "nb"))))
SCRIPTS["check_order"] = CHECK_ORDER


# -- null ---------------------------------------------------------------------------------------

# An optional field is an Option in the engine (null reads as absent) or a defaulted plain value
# (null is serde's type error).  Every optional field of every command, sent as null alone, and
# the defaulted ones next to their other fields.
def _null_script():
    from memstrata.strata.wire import SPECS

    steps = [{"type": w, f.name: None} for w, s in SPECS.items() for f in s.fields if not f.required]
    steps += [{"type": "storage", "audit": None}, {"type": "graph_create", "graph": "g"},
              {"type": "graph_delete", "graph": "g", "force": None},
              {"type": "graph_bulk_insert", "graph": "g", "nodes": None, "edges": []},
              {"type": "vector_create_collection", "collection": "c", "dimension": 1, "metric": "cosine"},
              {"type": "vector_upsert", "collection": "c", "key": "k", "vector": None},
              {"type": "vector_query", "collection": "c", "query": None, "k": 1},
              {"type": "vector_delete_collection", "collection": "c", "force": None},
              {"type": "branch_create", "branch": "b"},
              {"type": "branch_merge", "source": "default", "target": "b", "strategy": None},
              {"type": "branch_preview", "source": "default", "target": "b", "strategy": None}]
    return raw(*steps)


SCRIPTS["null_fields"] = _null_script()


# -- vector index diagnostics -------------------------------------------------------------------

# With k 0 the engine plans no search: no manifest read, no candidates, below the exact threshold
# whatever the collection holds.
SCRIPTS["index_query_k0"] = raw(
    {"type": "vector_create_collection", "collection": "c", "dimension": 1, "metric": "cosine"},
    {"type": "vector_index_query", "collection": "c", "query": [1.0], "k": 0},
    {"type": "vector_index_query", "collection": "c", "query": [1.0], "k": 1},
    *({"type": "vector_upsert", "collection": "c", "key": str(i), "vector": [1.0 + i]} for i in range(70)),
    {"type": "vector_index_query", "collection": "c", "query": [1.0], "k": 0},
    {"type": "vector_index_query", "collection": "c", "query": [1.0], "k": 1},
    {"type": "vector_index_query", "collection": "zz", "query": [1.0], "k": 0})


# -- serde sentences ----------------------------------------------------------------------------

# `cursor` is serde's alias of event_list's `after_sequence` (both may not be given, even as null);
# the analytics budget is a defaulted struct, so a shorter sequence keeps the other defaults; and
# the sentences around them (escaped control characters, one element, a null query before k).
_E = lambda **k: {"type": "event_list", **k}  # noqa: E731
SERDE = raw({"type": "graph_create", "graph": "g"}, {"type": "graph_add_node", "graph": "g", "node_id": "n1"},
            {"type": "graph_add_node", "graph": "g", "node_id": "n2"},
            {"type": "graph_add_edge", "graph": "g", "src": "n1", "edge_type": "e", "dst": "n2"},
            {"type": "event_append", "event_type": "t", "payload": {}},
            {"type": "event_append", "event_type": "t", "payload": {}},
            _E(cursor="1"), _E(cursor=0), _E(cursor=0, after_sequence=0), _E(after_sequence=0, cursor=0),
            _E(cursor=None, after_sequence=0), _E(after_sequence=None, cursor=0), _E(cursor=None),
            _E(after_sequence=0, cursor="x"),
            *({"type": t, "graph": "g", "budget": b, **({"start": "n1"} if t == "graph_bfs" else {})}
              for t in ("graph_bfs", "graph_cdlp", "graph_wcc") for b in ([], [1], [None], [1, 2], [5, 1], [1, 2, 3])),
            {"type": "branch_merge", "source": "default", "target": [1]},
            {"type": "kv_get", "key": "a\x00b\x01\x7f\t\n\r\"\\"}, {"type": "graph_get_meta", "graph": 5},
            {"type": "vector_query", "collection": "c", "query": None},
            {"type": "vector_delete_by_filter", "collection": "c", "filter": []})
SCRIPTS["serde"] = SERDE


# -- vector metadata filter fields --------------------------------------------------------------

# A filter condition's field must be a top-level metadata field: empty, past 1024 UTF-8 bytes, a NUL
# (the only control byte refused), then a `.` or `/` anywhere, in that order, first bad condition
# first.  Every command with a filter judges them after the collection name (and vector_query after
# its as_of conflict and vector input), before the branch, space and collection lookups.
def _metadata_field_script():
    def cond(field):
        return {"field": field, "op": "eq", "value": {"type": "number", "value": 1}}

    commands = {"vector_query": {"query": [1.0], "k": 5}, "vector_index_query": {"query": [1.0], "k": 5},
                "vector_delete_by_filter": {}}
    fields = [chr(i) for i in range(128)] + [f"a{chr(i)}b" for i in range(128)]
    fields += ["", "$.a", "$", "$a", "a.", ".a", "a/", "/a", "\u2024", "\uff0e", "\uff0f", "\u2215", "\x85", "\u3000",
               "\u00e9", "\U0001f600", "a" * 1024, "a" * 1025, "\u00e9" * 512, "\u00e9" * 513, "a" * 1023 + "\u00e9",
               "\u20ac" * 341 + "a", "a" * 1025 + "\x00", "a" * 1025 + ".", "\x00.", ".\x00", "/\x00", "a" * 2000 + "/"]
    steps = [{"type": "vector_create_collection", "collection": "c", "dimension": 1, "metric": "cosine"}]
    steps += [{"type": "vector_upsert", "collection": "c", "key": f"k{i}", "vector": [1.0 + i], "metadata": {f: 1}}
              for i, f in enumerate(["a b", " ", "\u00e9", "$", "a\n", "\t"])]
    for wire, extra in commands.items():
        steps += [{"type": wire, "collection": "c", "filter": {"conditions": [cond(f)]}, **extra} for f in fields]
        steps += [{"type": wire, "collection": "c", "filter": {"conditions": [cond(f) for f in pair]}, **extra}
                  for pair in (("x", "."), (".", "\x00"), ("\x00", "."), ("/", ""), ("a b", "a" * 1025))]
        for scope in ({"collection": ""}, {"collection": "_x"}, {"collection": "a/b"}, {"branch": "zz"},
                      {"branch": ""}, {"space": ""}, {"space": "zz"}, {"space": "_x"}, {"collection": "missing"},
                      {"as_of": 1, "as_of_time": 1}, {"as_of": 0}, {"query": [1.0, 2.0]}, {"k": 0},
                      {"query": [1.0], "text": "hi"}, {"branch": "zz", "as_of": 1, "as_of_time": 1},
                      {"query": [1e-50]}, {"query": [1e50]}, {"query": []}, {"collection": "", "query": [1e-50]},
                      {"collection": "", "query": [1.0], "text": "hi"}, {"as_of": 1, "as_of_time": 1, "query": [1e-50]}):
            steps.append({"type": wire, "collection": "c", "filter": {"conditions": [cond("a.b")]}, **extra, **scope})
        steps += [{"type": "vector_count", "collection": "c"}]
    # Any read judges an as_of conflict after its own names, before the branch and space names.
    reads = [{"type": "kv_get", "key": B("k")}, {"type": "json_get", "key": "d", "path": "$"},
             {"type": "vector_count", "collection": "c"}, {"type": "vector_get", "collection": "c", "key": "k"},
             {"type": "graph_list_nodes", "graph": "g"}]
    steps += [dict(r, as_of=1, as_of_time=1, **scope) for r in reads
              for scope in ({"branch": "zz"}, {"branch": ""}, {"space": ""}, {"space": "_x"})]
    steps += [{"type": "vector_count", "collection": "", "as_of": 1, "as_of_time": 1},
              {"type": "graph_list_nodes", "graph": "", "as_of": 1, "as_of_time": 1}]
    return raw(*steps)


SCRIPTS["vector_metadata_fields"] = _metadata_field_script()


# -- base64 sentences ---------------------------------------------------------------------------

# KV bytes are decoded as the base64 crate decodes them, over the UTF-8 bytes of the text: a last
# lone byte that is neither a symbol nor `=` first, then the quads before the last one in order
# (`=` is no symbol there), then the last quad (`=` in its first two places, a symbol after `=`),
# then its length, its padding and its unused bits.  The sentences name the offending byte and offset.
def _base64_script():
    import random

    texts = ["\u00e9\u2603", "abc\u00e9", "YQ==\n", "YQ===", "a===", "====", "", "Y", "YQ", "YQ=", "YR==", "YQ=a",
             "YQ==YQ==", "abcd=", "abcde", "abcd\n", "ab=c", "a=bc", "=abc", "YWI", "YWJ=", "YWK=", "Y\n==", "YQ\n=",
             "  ", "YQ== ", "\nYQ==", "abcdabc=d", "abcdab==a", "abcdab=a=", "abcd====", "ab==ab==", "\u20ac", "a\u20ac",
             "ab\u20ac", "abc\u20ac", "abcd\u20ac", "YQ=\u00e9", "YQ-_", "YQ.=", "QUJD" * 9 + "=", "QUJD" * 9 + "Q=",
             "QUJD" * 8 + "Q\n" + "QUJD", "QUJD" * 10 + "\u00e9"]
    rng = random.Random(7)
    texts += ["".join(rng.choice("AQYa+/=\n \u00e9-") for _ in range(length)) for length in range(1, 10) for _ in range(12)]
    steps = []
    for t in texts:
        steps += [{"type": "kv_put", "key": t, "value": B("v")}, {"type": "kv_put", "key": B("k"), "value": t},
                  {"type": "kv_get", "key": t}, {"type": "kv_list", "prefix": t}]
    return raw(*steps)


SCRIPTS["base64_sentences"] = _base64_script()
