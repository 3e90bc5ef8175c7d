"""The real Strata engine (stratadb 1.2.7) answering MCP tool calls, as the oracle.

``OracleSession.call_tool`` turns a tool call into a wire command the way the
real server does (reference §3: arguments pass through, ``type`` is set, KV
text becomes base64, ``strata_branch_fork`` picks its variant) and wraps the
engine's answer the way the real server wraps it (reference §2).  Written
here from the reference, independently of the server under test.

Where MemStrata deliberately differs (reference §9.2: ``metric``, ``k`` and
``direction`` get their documented defaults instead of a missing-field
error), the oracle applies the same defaults so the rest can be compared.
"""

from __future__ import annotations

import base64
import json
import re

from stratadb import _stratadb

DEFAULTED = {"strata_vector_create_collection": ("metric", "cosine"),
             "strata_vector_query": ("k", 10),
             "strata_graph_neighbors": ("direction", "outgoing")}
PASS_THROUGH = {
    "strata_kv_put": "kv_put", "strata_kv_get": "kv_get", "strata_kv_delete": "kv_delete",
    "strata_kv_list": "kv_list", "strata_json_set": "json_set", "strata_json_get": "json_get",
    "strata_json_delete": "json_delete", "strata_vector_create_collection": "vector_create_collection",
    "strata_vector_upsert": "vector_upsert", "strata_vector_query": "vector_query",
    "strata_event_append": "event_append", "strata_event_list": "event_list",
    "strata_graph_create": "graph_create", "strata_graph_add_node": "graph_add_node",
    "strata_graph_add_edge": "graph_add_edge", "strata_graph_neighbors": "graph_neighbors",
    "strata_branch_list": "branch_list",
}
BASE64_TEXT = {"strata_kv_put": ("key", "value"), "strata_kv_get": ("key",),
               "strata_kv_delete": ("key",), "strata_kv_list": ("prefix",)}
_POSITION = re.compile(r" at line \d+ column \d+$")


class OracleSession:
    def __init__(self, path: str | None = None):
        self.handle = _stratadb.Handle.open_durable(path) if path else _stratadb.Handle.open_cache()

    def close(self) -> None:
        self.handle.close()

    def execute(self, command) -> tuple[str, str]:
        """("ok"|"error"|"invalid", text) for one wire command."""
        try:
            return "ok", self.handle.execute(json.dumps(command))
        except _stratadb.StrataNativeError as exc:
            return "error", json.dumps({"error": json.loads(exc.args[0])})
        except ValueError as exc:
            message = str(exc).removeprefix("invalid command: ")
            return "invalid", _POSITION.sub("", message)

    def call_tool(self, name: str, arguments: dict) -> tuple[str, bool]:
        args = dict(arguments)
        if name == "strata_command":
            if "command" not in args:
                return ('strata_command requires `command`: a serialized command object like '
                        '{"type":"kv_scan","limit":10}'), True
            command = args["command"]
        else:
            if name == "strata_branch_fork":
                if "version" in args and "timestamp" in args:
                    return "pass either `version` or `timestamp`, not both", True
                wire = ("branch_fork_at_version" if "version" in args else
                        "branch_fork_at_timestamp" if "timestamp" in args else "branch_fork_current")
            else:
                wire = PASS_THROUGH[name]
            for field in BASE64_TEXT.get(name, ()):
                if field in args:
                    if not isinstance(args[field], str):
                        return f"`{field}` must be a string", True
                    args[field] = base64.b64encode(args[field].encode()).decode()
            if name in DEFAULTED:
                field, default = DEFAULTED[name]
                if args.get(field) is None:
                    args[field] = default
            args["type"] = wire
            command = args
        kind, text = self.execute(command)
        if kind == "invalid":
            return f"invalid arguments for `{name}`: {text}", True
        return text, kind == "error"
