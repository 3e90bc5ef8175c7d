"""Bad input that breaks the real engine, or that the differential suite cannot send it, answered cleanly here."""

from __future__ import annotations

import json
import resource


from memstrata.strata.errors import known_codes

from .differential import parse
from .random_scripts import random_script
from .graph_scenarios import SCRIPTS as GRAPH_SCRIPTS
from .merge_scenarios import SCRIPTS as MERGE_SCRIPTS
from .ontology_scenarios import SCRIPTS as ONTOLOGY_SCRIPTS
from .compat_scenarios import SCRIPTS as COMPAT_SCRIPTS
from .scenarios import SCRIPTS


def call(server, name, arguments):
    text, is_error = server.call_tool(name, arguments)
    return parse(text), is_error


def command(server, **cmd):
    return call(server, "strata_command", {"command": cmd})


def test_huge_limits_do_not_exhaust_memory(server):
    """limit 10^12 aborts the real engine (allocation); here it is just "everything"."""
    for i in range(300):
        server.call_tool("strata_kv_put", {"key": f"k{i:03d}", "value": "v"})
        server.call_tool("strata_event_append", {"event_type": "t", "payload": {"i": i}})
    server.call_tool("strata_graph_create", {"graph": "g"})
    server.call_tool("strata_graph_add_node", {"graph": "g", "node_id": "a"})
    server.call_tool("strata_vector_create_collection", {"collection": "c", "dimension": 2})
    server.call_tool("strata_vector_upsert", {"collection": "c", "key": "a", "vector": [1, 0]})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for huge in (10**12, 2**64 - 1):
        out, err = call(server, "strata_kv_list", {"limit": huge})
        assert not err and len(out["data"]["items"]) == 300 and out["data"]["has_more"] is False
        out, err = command(server, type="kv_scan", limit=huge)
        assert not err and len(out["data"]["items"]) == 300
        out, err = call(server, "strata_event_list", {"limit": huge})
        assert not err and len(out["data"]["items"]) == 300
        out, err = call(server, "strata_graph_neighbors", {"graph": "g", "node_id": "a", "limit": huge})
        assert not err and out["data"]["items"] == []
        out, err = call(server, "strata_vector_query", {"collection": "c", "query": [1, 0], "k": huge})
        assert not err and len(out["data"]) == 1
        out, err = command(server, type="json_list", limit=huge)
        assert not err
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000


def test_kv_list_with_a_cursor_and_no_limit(server):
    """This panics inside the real engine (capacity overflow); here it lists the rest."""
    for key in ("a", "b", "c"):
        server.call_tool("strata_kv_put", {"key": key, "value": "v"})
    cursor = json.loads(server.call_tool("strata_kv_list", {"limit": 1})[0])["data"]["cursor"]
    out, err = call(server, "strata_kv_list", {"cursor": cursor})
    assert not err and out["data"] == {"items": ["Yg==", "Yw=="], "has_more": False, "cursor": None}


def test_wrong_types_get_one_plain_sentence(server):
    cases = {
        ("strata_kv_list", json.dumps({"limit": "ten"})): "invalid arguments for `strata_kv_list`: invalid type: "
                                                          'string "ten", expected u64',
        ("strata_vector_query", json.dumps({"collection": "c", "query": "abc"})):
            'invalid arguments for `strata_vector_query`: invalid type: string "abc", expected a sequence',
        ("strata_json_get", json.dumps({"key": "k"})): "invalid arguments for `strata_json_get`: missing field `path`",
        ("strata_kv_put", json.dumps({"key": {"a": 1}, "value": "v"})): "`key` must be a string",
        ("strata_branch_fork", json.dumps({"source": "default", "branch": "x", "version": 1, "timestamp": 1})):
            "pass either `version` or `timestamp`, not both",
        ("strata_command", json.dumps({})): 'strata_command requires `command`: a serialized command object like '
                                           '{"type":"kv_scan","limit":10}',
    }
    for (name, args), sentence in cases.items():
        text, is_error = server.call_tool(name, json.loads(args))
        assert is_error and text == sentence
        assert "\n" not in text and "pydantic" not in text.lower() and "Traceback" not in text


def test_unsupported_cataloged_command_is_a_clear_envelope(server):
    out, err = command(server, type="remote_get")
    assert err
    status = out["error"]
    assert status["code"] == "unsupported.server.command" and status["class"] == "unsupported"
    assert "`remote_get`" in status["message"] and status["retryable"] is False
    out, err = call(server, "strata_command", {"command": {"type": "inference_generate"}})
    assert out["error"]["code"] == "unsupported.server.command"


def test_large_and_deep_values(server):
    big = "x" * 2_000_000
    out, err = call(server, "strata_kv_put", {"key": "big", "value": big})
    assert not err
    out, err = call(server, "strata_json_set", {"key": "deep", "path": "$", "value": {"a": [[[[{"b": 1}]]]]}})
    assert not err
    out, err = call(server, "strata_kv_put", {"key": "k" * 70_000, "value": "v"})
    assert err and out["error"]["code"] == "invalid_argument.engine.persistence"
    assert out["error"]["details"][2] == {"key": "actual_bytes", "value": "70043"}


def test_nesting_and_surrogates_are_parse_errors(server):
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    assert json.loads(server.handle_line(deep))["error"] == {
        "code": -32700, "message": "parse error: recursion limit exceeded at line 1 column 128"}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "strata_kv_put", "arguments": {"key": "x", "value": "y"}}})
    answer = json.loads(server.handle_line(line.replace('"x"', '"\\ud800"').encode()))
    assert answer["error"]["code"] == -32700 and answer["id"] is None


def test_a_line_nested_past_serde_jsons_recursion_limit_is_a_parse_error(server):
    # The real server reads a line with serde_json, which refuses the 128th nested container
    # (the line's own three levels count): a document 124 arrays deep reaches the engine and is
    # json_document_too_deep there, one 125 deep never gets past the line.
    def json_set(depth: int) -> bytes:
        value = "[" * depth + "]" * depth
        return ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"strata_json_set",'
                '"arguments":{"key":"d","path":"$","value":%s}}}' % value).encode()

    result = json.loads(server.handle_line(json_set(124)))["result"]
    assert json.loads(result["content"][0]["text"])["error"]["code"] == "invalid_argument.engine.json_document_too_deep"
    column = json_set(125).index(b"[" * 125) + 125
    assert json.loads(server.handle_line(json_set(125))) == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32700, "message": f"parse error: recursion limit exceeded at line 1 column {column}"}}
    # Brackets inside strings are text, not nesting.
    text = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "strata_json_set", "arguments": {"key": "d", "path": "$", "value": "[{" * 200}}})
    assert "result" in json.loads(server.handle_line(text.encode()))


def test_every_engine_code_is_covered_by_the_differential_scripts(server):
    """Each error code this server can produce (bar its own `server` codes) occurs in a compared script."""
    from memstrata.strata.mcp import StrataServer
    from memstrata.strata.engine import Engine
    from memstrata.strata.store import StrataStore

    seen = set()
    scripts = [*SCRIPTS.values(), *GRAPH_SCRIPTS.values(), *ONTOLOGY_SCRIPTS.values(), *MERGE_SCRIPTS.values(),
               *COMPAT_SCRIPTS.values(),
               random_script(0, 250)]
    for script in scripts:
        store = StrataStore.memory()
        s = StrataServer(Engine(store))
        from .differential import Side, pick, resolve
        side = Side()
        for step in script:
            text, is_error = s.call_tool(step[0], resolve(step[1], side))
            value = parse(text)
            for name, path in (step[2] if len(step) > 2 else {}).items():
                if not is_error:
                    side.saved[name] = pick(value, path)
            if is_error and isinstance(value, dict):
                seen.add(value["error"]["code"])
            elif isinstance(value, dict) and isinstance(value.get("data"), dict):
                # A batch reports the errors of its items inside a success.
                seen.update(i["error"]["code"] for i in value["data"].get("items") or []
                            if isinstance(i, dict) and i.get("error"))
        store.close()
    engine_codes = {c for c in known_codes() if ".server." not in c}
    assert engine_codes - seen == set()


def test_arguments_this_server_does_not_implement_are_named(server):
    out, err = command(server, type="vector_create_collection", collection="docs", dimension=3,
                       metric="cosine", embedding_model="minilm")
    assert err and out["error"]["code"] == "unsupported.server.argument"
    assert out["error"]["class"] == "unsupported" and "embedding models" in out["error"]["message"]
    out, err = command(server, type="graph_create", graph="g")
    assert not err, out
    # Nothing was created by the refusal.
    out, err = command(server, type="vector_list_collections")
    assert not err and "docs" not in json.dumps(out)


SAFE_B64 = "c2FmZQ=="  # "safe": KV values travel base64-encoded


def test_a_full_disk_is_a_storage_error_that_loses_nothing(tmp_path):
    from memstrata.strata.mcp import StrataServer
    from memstrata.strata.engine import Engine
    from memstrata.strata.store import StrataStore

    from ..harness.test_disk_faults import fill, tmpfs

    with tmpfs(tmp_path / "disk", "8m") as disk:
        folder = disk / "db"
        folder.mkdir()
        store = StrataStore.open(folder)
        server = StrataServer(Engine(store))
        out, err = call(server, "strata_kv_put", {"key": "kept", "value": "safe"})
        assert not err, out
        filler = fill(disk, leave=0)
        refused = None
        for i in range(50):  # until SQLite needs a page the disk no longer has
            out, err = call(server, "strata_kv_put", {"key": f"big{i}", "value": "x" * 200_000})
            if err:
                refused = (i, out)
                break
        assert refused is not None, "the full disk never refused a write"
        i, out = refused
        status = out["error"]
        assert status["code"] == "internal.server.storage" and status["class"] == "internal", status
        assert str(disk) not in status["message"] and "Traceback" not in status["message"]
        out, err = call(server, "strata_kv_get", {"key": "kept"})
        assert not err and out["data"]["value"]["value"] == SAFE_B64
        store.close()
        filler.unlink()
        store = StrataStore.open(folder)  # reopens intact: the refused write left nothing
        server = StrataServer(Engine(store))
        out, err = call(server, "strata_kv_get", {"key": "kept"})
        assert not err and out["data"]["value"]["value"] == SAFE_B64
        out, err = call(server, "strata_kv_get", {"key": f"big{i}"})
        assert not err and out["data"]["found"] is False
        store.close()
