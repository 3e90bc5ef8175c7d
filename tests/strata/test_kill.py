"""SIGKILL during a burst of writes on a durable database, then reopen.

Every commit the server acknowledged must be there after the kill, and
nothing may be half-applied: an event log still verifies, a graph's counts
match its nodes and edges, a collection's count matches its vectors, and
the SQLite file passes its integrity check.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import threading

import pytest

from memstrata.strata.mcp import StrataServer
from memstrata.strata.engine import Engine
from memstrata.strata.store import StrataStore

from .conftest import STRATA, command_runner, strata_env, tool_call

pytestmark = pytest.mark.timeout(180)

SETUP = [("strata_vector_create_collection", {"collection": "v", "dimension": 4}),
         ("strata_graph_create", {"graph": "g"}),
         ("strata_graph_add_node", {"graph": "g", "node_id": "hub"})]


def burst(i: int) -> tuple[str, dict]:
    kind = i % 5
    if kind == 0:
        return "strata_kv_put", {"key": f"k{i}", "value": f"value {i}" * 20}
    if kind == 1:
        return "strata_json_set", {"key": f"doc{i % 7}", "path": f"$.f{i}", "value": {"i": i}}
    if kind == 2:
        return "strata_event_append", {"event_type": "burst", "payload": {"i": i}}
    if kind == 3:
        return "strata_vector_upsert", {"collection": "v", "key": f"v{i}", "vector": [i, 1, 0, -1]}
    return "strata_command", {"command": {"type": "graph_add_node", "graph": "g", "node_id": f"n{i}"}}


def edge_after(i: int) -> tuple[str, dict]:
    return "strata_graph_add_edge", {"graph": "g", "src": f"n{i}", "edge_type": "to", "dst": "hub"}


@pytest.mark.parametrize("kill_after", [150, 700])
def test_sigkill_during_a_write_burst_loses_no_acknowledged_commit(tmp_path, kill_after):
    db = tmp_path / "db"
    proc = subprocess.Popen([STRATA, str(db), "mcp", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=strata_env(tmp_path))
    calls: dict[int, tuple[str, dict]] = {}
    ids = iter(range(1, 10**6))
    for name, args in SETUP:
        calls[next(ids)] = (name, args)
    for i in range(5000):
        calls[next(ids)] = burst(i)
        if i % 5 == 4:
            calls[next(ids)] = edge_after(i)

    def feed():
        try:
            for id_, (name, args) in calls.items():
                proc.stdin.write((tool_call(id_, name, args) + "\n").encode())
            proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the server was killed mid-burst

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    acknowledged: dict[int, dict] = {}
    while len(acknowledged) < kill_after + len(SETUP):
        answer = json.loads(proc.stdout.readline())
        assert answer["result"]["isError"] is False, answer
        acknowledged[answer["id"]] = json.loads(answer["result"]["content"][0]["text"])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    writer.join(timeout=30)

    store = StrataStore.open(db)  # the lock died with the server
    try:
        assert store.integrity_ok()
        server = StrataServer(Engine(store))
        run = command_runner(server)

        head = max(a["data"]["commit"]["version"] for a in acknowledged.values() if "commit" in a["data"])
        assert store.head >= head
        for id_, answer in acknowledged.items():
            name, args = calls[id_]
            if name == "strata_kv_put":
                text, _ = server.call_tool("strata_kv_get", {"key": args["key"]})
                got = json.loads(text)["data"]["value"]
                assert base64.b64decode(got["value"]).decode() == args["value"]
                assert got["version"] == answer["data"]["commit"]["version"]
            elif name == "strata_json_set":
                text, _ = server.call_tool("strata_json_get", {"key": args["key"], "path": args["path"]})
                assert json.loads(text)["data"]["value"]["value"] == args["value"]
            elif name == "strata_event_append":
                got = run({"type": "event_get", "sequence": answer["data"]["sequence"]})
                assert got["value"]["event"]["payload"] == args["payload"]
            elif name == "strata_vector_upsert":
                assert run({"type": "vector_exists", "collection": "v", "key": args["key"]}) is True
            elif name == "strata_graph_add_edge":
                assert run({"type": "graph_get_edge", "graph": "g", "src": args["src"], "edge_type": "to",
                            "dst": "hub"})["found"] is True

        chain = run({"type": "event_verify_chain"})
        assert chain["valid"] is True and chain["length"] == run({"type": "event_count"})["count"]
        meta = run({"type": "graph_get_meta", "graph": "g"})
        nodes = run({"type": "graph_neighbors", "graph": "g", "node_id": "hub", "direction": "incoming",
                     "limit": 10**9})["items"]
        assert meta["edge_count"] == len(nodes)
        assert run({"type": "vector_count", "collection": "v"}) == len(
            [k for k in (json.loads(server.call_tool("strata_vector_query", {
                "collection": "v", "query": [1, 1, 1, 1], "k": 10**9})[0])["data"])])
        # and the reopened database takes new commits after the last one
        text, is_error = server.call_tool("strata_kv_put", {"key": "after", "value": "kill"})
        assert not is_error and json.loads(text)["data"]["commit"]["version"] == store.head
    finally:
        store.close()
