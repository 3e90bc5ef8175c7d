"""The 20 Strata MCP tools: their schemas and how a call becomes a wire command.

Arguments pass straight onto the wire command (the tool sets ``type``), so
the executor's own checks answer every bad argument.  The only transforms are
the ones the real server makes: KV text becomes base64 bytes, and
``strata_branch_fork`` picks its wire command from the anchor it is given.

Where the real server's schema calls a field optional but its wire requires
it, this server applies the documented default instead of failing:
``metric`` cosine, ``k`` 10, ``direction`` outgoing.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

DEFAULTS = {
    "strata_vector_create_collection": {"metric": "cosine"},
    "strata_vector_query": {"k": 10},
    "strata_graph_neighbors": {"direction": "outgoing"},
}

WIRE = {
    "strata_kv_put": "kv_put", "strata_kv_get": "kv_get", "strata_kv_delete": "kv_delete",
    "strata_kv_list": "kv_list", "strata_json_set": "json_set", "strata_json_get": "json_get",
    "strata_json_delete": "json_delete", "strata_vector_create_collection": "vector_create_collection",
    "strata_vector_upsert": "vector_upsert", "strata_vector_query": "vector_query",
    "strata_event_append": "event_append", "strata_event_list": "event_list",
    "strata_graph_create": "graph_create", "strata_graph_add_node": "graph_add_node",
    "strata_graph_add_edge": "graph_add_edge", "strata_graph_neighbors": "graph_neighbors",
    "strata_branch_list": "branch_list",
}

TEXT_FIELDS = {
    "strata_kv_put": ("key", "value"), "strata_kv_get": ("key",), "strata_kv_delete": ("key",),
    "strata_kv_list": ("prefix",),
}

COMMAND_HINT = ('strata_command requires `command`: a serialized command object like '
                '{"type":"kv_scan","limit":10}')


class ToolInputError(Exception):
    """A tool-layer refusal: one plain sentence, answered as an error result."""


class UnknownTool(Exception):
    pass


@dataclass(slots=True)
class Call:
    """What a tool call runs: the guide, or one wire command."""

    guide: bool = False
    command: Any = None


def build_call(name: str, arguments: dict) -> Call:
    args = dict(arguments)
    if name == "strata_guide":
        return Call(guide=True)
    if name == "strata_command":
        if "command" not in args:
            raise ToolInputError(COMMAND_HINT)
        return Call(command=args["command"])
    if name == "strata_branch_fork":
        has_version, has_timestamp = "version" in args, "timestamp" in args
        if has_version and has_timestamp:
            raise ToolInputError("pass either `version` or `timestamp`, not both")
        wire = ("branch_fork_at_version" if has_version else
                "branch_fork_at_timestamp" if has_timestamp else "branch_fork_current")
    elif name in WIRE:
        wire = WIRE[name]
    else:
        raise UnknownTool(name)
    for field in TEXT_FIELDS.get(name, ()):
        if field in args:
            if not isinstance(args[field], str):
                raise ToolInputError(f"`{field}` must be a string")
            args[field] = base64.b64encode(args[field].encode("utf-8")).decode("ascii")
    for field, default in DEFAULTS.get(name, {}).items():
        if args.get(field) is None:
            args[field] = default
    args["type"] = wire
    return Call(command=args)


# -- schemas ---------------------------------------------------------------------------------


def _s(description: str) -> dict:
    return {"type": "string", "description": description}


def _i(description: str) -> dict:
    return {"type": "integer", "description": description}


def _numbers(description: str) -> dict:
    return {"type": "array", "items": {"type": "number"}, "description": description}


AS_OF = ("as_of", _i("Read the state as of this commit timestamp (a write receipt's data.commit.timestamp)"))


def _scoped(props: list[tuple[str, dict]], required: list[str]) -> dict:
    properties = dict(props)
    properties["branch"] = _s("Branch to use (default: the session branch: `default`, or the one --branch named)")
    properties["space"] = _s("Space inside the branch (default: `default`); created on first write")
    return {"type": "object", "properties": properties, "required": required}


TOOLS: list[dict] = [
    {"name": "strata_guide",
     "description": "Returns this server's usage guide in markdown: targeting, the output and error "
                    "contract, and every command strata_command accepts. Read it before guessing.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "strata_command",
     "description": "Runs one raw wire command, e.g. {\"command\":{\"type\":\"kv_scan\",\"limit\":10}}. "
                    "Byte fields (KV keys, values, cursors) are base64. Bad input returns the exact "
                    "field-level error. strata_guide lists the supported commands.",
     "inputSchema": {"type": "object", "properties": {
         "command": {"type": "object", "description": "The command object: {\"type\": ..., fields...}"}},
         "required": ["command"]}},
    {"name": "strata_kv_put",
     "description": "Stores a text value under a text key and returns the commit receipt (version, "
                    "timestamp). Example: {\"key\":\"greeting\",\"value\":\"hello\"}.",
     "inputSchema": _scoped([("key", _s("Key (text)")),
                             ("value", _s("Value (text); binary values go through strata_command"))],
                            ["key", "value"])},
    {"name": "strata_kv_get",
     "description": "Reads one key; data.value is base64. Pass as_of to read an earlier state. "
                    "Example: {\"key\":\"greeting\"}.",
     "inputSchema": _scoped([("key", _s("Key (text)")), AS_OF], ["key"])},
    {"name": "strata_kv_delete",
     "description": "Deletes one key; the effect says not_found when there was nothing to delete.",
     "inputSchema": _scoped([("key", _s("Key (text)"))], ["key"])},
    {"name": "strata_kv_list",
     "description": "Lists keys (base64) in byte order, optionally under a prefix; pass the returned "
                    "cursor back for the next page. Example: {\"prefix\":\"app:\",\"limit\":100}.",
     "inputSchema": _scoped([("prefix", _s("Key prefix (text)")),
                             ("cursor", _s("The base64 cursor of the previous page")),
                             ("limit", _i("Most keys to return (default: all)")), AS_OF], [])},
    {"name": "strata_json_set",
     "description": "Sets the value at a JSON path of a document, creating it when missing; path `$` "
                    "replaces the whole document. Example: {\"key\":\"user:1\",\"path\":\"$.name\",\"value\":\"Ada\"}.",
     "inputSchema": _scoped([("key", _s("Document id")), ("path", _s("JSON path: $, $.field, $.list[0]")),
                             ("value", {"description": "Any JSON value"})], ["key", "path", "value"])},
    {"name": "strata_json_get",
     "description": "Reads the value at a JSON path of a document, with its version and document_version.",
     "inputSchema": _scoped([("key", _s("Document id")), ("path", _s("JSON path")), AS_OF], ["key", "path"])},
    {"name": "strata_json_delete",
     "description": "Deletes the value at a JSON path; path `$` deletes the whole document.",
     "inputSchema": _scoped([("key", _s("Document id")), ("path", _s("JSON path"))], ["key", "path"])},
    {"name": "strata_vector_create_collection",
     "description": "Creates a vector collection of a fixed dimension. metric: cosine (default), "
                    "euclidean or dot_product. Example: {\"collection\":\"docs\",\"dimension\":384}.",
     "inputSchema": _scoped([("collection", _s("Collection name")), ("dimension", _i("Vector dimension")),
                             ("metric", _s("cosine | euclidean | dot_product (default cosine)"))],
                            ["collection", "dimension"])},
    {"name": "strata_vector_upsert",
     "description": "Inserts or replaces one vector with optional metadata. Example: "
                    "{\"collection\":\"docs\",\"key\":\"doc-1\",\"vector\":[0.1,0.9],"
                    "\"metadata\":{\"kind\":\"note\"}}.",
     "inputSchema": _scoped([("collection", _s("Collection name")), ("key", _s("Vector key")),
                             ("vector", _numbers("The vector (collection dimension)")),
                             ("metadata", {"type": "object", "description": "Optional metadata object"})],
                            ["collection", "key", "vector"])},
    {"name": "strata_vector_query",
     "description": "Finds the k most similar vectors (default 10), optionally filtered by metadata "
                    "equalities: {\"conditions\":[{\"field\":\"kind\",\"op\":\"eq\","
                    "\"value\":{\"type\":\"string\",\"value\":\"note\"}}]}.",
     "inputSchema": _scoped([("collection", _s("Collection name")), ("query", _numbers("Query vector")),
                             ("k", _i("Most matches to return (default 10)")),
                             ("filter", {"type": "object", "description": "Metadata filter; conditions are AND-ed"}),
                             AS_OF], ["collection", "query"])},
    {"name": "strata_event_append",
     "description": "Appends one immutable event to the log (dense sequence numbers, SHA-256 hash "
                    "chain). Example: {\"event_type\":\"user.created\",\"payload\":{\"id\":1}}.",
     "inputSchema": _scoped([("event_type", _s("Event type, e.g. user.created")),
                             ("payload", {"description": "Event payload (a JSON object)"})],
                            ["event_type", "payload"])},
    {"name": "strata_event_list",
     "description": "Lists events in sequence order, optionally of one type, after a sequence number.",
     "inputSchema": _scoped([("event_type", _s("Only events of this type")), ("limit", _i("Most events to return")),
                             ("after_sequence", _i("Start after this sequence number")), AS_OF], [])},
    {"name": "strata_graph_create",
     "description": "Creates a named graph. Example: {\"graph\":\"deps\"}.",
     "inputSchema": _scoped([("graph", _s("Graph name"))], ["graph"])},
    {"name": "strata_graph_add_node",
     "description": "Adds or replaces a node with optional properties. Example: "
                    "{\"graph\":\"deps\",\"node_id\":\"core\",\"properties\":{\"lang\":\"rust\"}}.",
     "inputSchema": _scoped([("graph", _s("Graph name")), ("node_id", _s("Node id")),
                             ("properties", {"type": "object", "description": "Optional properties"})],
                            ["graph", "node_id"])},
    {"name": "strata_graph_add_edge",
     "description": "Adds or replaces a typed edge between two existing nodes (weight defaults to 1.0). "
                    "Example: {\"graph\":\"deps\",\"src\":\"cli\",\"edge_type\":\"depends_on\",\"dst\":\"core\"}.",
     "inputSchema": _scoped([("graph", _s("Graph name")), ("src", _s("Source node id")),
                             ("edge_type", _s("Edge type")), ("dst", _s("Destination node id")),
                             ("weight", {"type": "number", "description": "Optional weight (default 1.0)"}),
                             ("properties", {"type": "object", "description": "Optional properties"})],
                            ["graph", "src", "edge_type", "dst"])},
    {"name": "strata_graph_neighbors",
     "description": "Lists a node's neighbours with the connecting edges. direction: outgoing "
                    "(default), incoming or both; at most limit per page (default 100).",
     "inputSchema": _scoped([("graph", _s("Graph name")), ("node_id", _s("Node id")),
                             ("direction", _s("outgoing | incoming | both (default outgoing)")),
                             ("edge_type", _s("Only edges of this type")),
                             ("limit", _i("Most neighbours to return (default 100)")), AS_OF],
                            ["graph", "node_id"])},
    {"name": "strata_branch_list",
     "description": "Lists the branches with their status and lineage (parent, fork version).",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "strata_branch_fork",
     "description": "Forks a branch at its head, or at a retained commit `version` or `timestamp` (time "
                    "travel). The fork shares history with its source; later writes are isolated. "
                    "Example: {\"source\":\"default\",\"branch\":\"experiment\"}.",
     "inputSchema": {"type": "object", "properties": {
         "source": _s("Branch to fork"), "branch": _s("Name of the new branch"),
         "version": _i("Fork at this retained commit version"),
         "timestamp": _i("Fork at the newest commit at or before this commit timestamp")},
         "required": ["source", "branch"]}},
]

TOOL_NAMES = tuple(t["name"] for t in TOOLS)
