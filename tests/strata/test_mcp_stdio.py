"""``strata mcp serve`` over a real stdio subprocess: the MCP SDK's own client, and raw JSON-RPC lines."""

from __future__ import annotations

import base64
import json

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from .conftest import INITIALIZE, INITIALIZED, STRATA, answers, request, run_lines, strata_env, tool_call

pytestmark = pytest.mark.timeout(120)

TOOLS = {
    # name: (required, {property: JSON type or None for "any"})
    "strata_guide": ([], {}),
    "strata_command": (["command"], {"command": "object"}),
    "strata_kv_put": (["key", "value"], {"key": "string", "value": "string"}),
    "strata_kv_get": (["key"], {"key": "string", "as_of": "integer"}),
    "strata_kv_delete": (["key"], {"key": "string"}),
    "strata_kv_list": ([], {"prefix": "string", "cursor": "string", "limit": "integer", "as_of": "integer"}),
    "strata_json_set": (["key", "path", "value"], {"key": "string", "path": "string", "value": None}),
    "strata_json_get": (["key", "path"], {"key": "string", "path": "string", "as_of": "integer"}),
    "strata_json_delete": (["key", "path"], {"key": "string", "path": "string"}),
    "strata_vector_create_collection": (["collection", "dimension"],
                                        {"collection": "string", "dimension": "integer", "metric": "string"}),
    "strata_vector_upsert": (["collection", "key", "vector"],
                             {"collection": "string", "key": "string", "vector": "array", "metadata": "object"}),
    "strata_vector_query": (["collection", "query"], {"collection": "string", "query": "array", "k": "integer",
                                                      "filter": "object", "as_of": "integer"}),
    "strata_event_append": (["event_type", "payload"], {"event_type": "string", "payload": None}),
    "strata_event_list": ([], {"event_type": "string", "limit": "integer", "after_sequence": "integer",
                               "as_of": "integer"}),
    "strata_graph_create": (["graph"], {"graph": "string"}),
    "strata_graph_add_node": (["graph", "node_id"], {"graph": "string", "node_id": "string", "properties": "object"}),
    "strata_graph_add_edge": (["graph", "src", "edge_type", "dst"],
                              {"graph": "string", "src": "string", "edge_type": "string", "dst": "string",
                               "weight": "number", "properties": "object"}),
    "strata_graph_neighbors": (["graph", "node_id"], {"graph": "string", "node_id": "string", "direction": "string",
                                                      "edge_type": "string", "limit": "integer", "as_of": "integer"}),
    "strata_branch_list": ([], {}),
    "strata_branch_fork": (["source", "branch"], {"source": "string", "branch": "string", "version": "integer",
                                                  "timestamp": "integer"}),
}
UNSCOPED = {"strata_guide", "strata_command", "strata_branch_list", "strata_branch_fork"}


async def _sdk_session(args: list[str], env: dict, errlog, calls: list[tuple[str, dict]]):
    params = StdioServerParameters(command=STRATA, args=args, env=env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        tools = (await session.list_tools()).tools
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
        return init, tools, results


def test_sdk_client_session(tmp_path):
    db = tmp_path / "agent"
    calls = [
        ("strata_kv_put", {"key": "greeting", "value": "hello"}),
        ("strata_kv_get", {"key": "greeting"}),
        ("strata_kv_get", {"key": "greeting", "ttl": 1}),
        ("strata_vector_create_collection", {"collection": "docs", "dimension": 2}),
        ("strata_vector_upsert", {"collection": "docs", "key": "a", "vector": [0.1, 0.9]}),
        ("strata_vector_query", {"collection": "docs", "query": [0.1, 0.9]}),
        ("strata_branch_fork", {"source": "default", "branch": "exp"}),
        ("strata_branch_list", {}),
        ("strata_guide", {}),
        ("strata_command", {"command": {"type": "kv_scan", "limit": 10}}),
        ("strata_kv_put", {"key": "", "value": "x"}),
    ]
    with open(tmp_path / "stderr", "w") as errlog:
        init, tools, r = anyio.run(_sdk_session, [str(db), "mcp", "serve"], strata_env(tmp_path), errlog, calls)

    assert init.server_info.name == "strata"
    assert init.instructions.startswith("Strata is an embedded multi-model database (KV, JSON, vectors, events, "
                                        "graphs) with branches and time travel. When unsure, call the "
                                        "`strata_guide` tool first")
    assert init.capabilities.tools is not None and init.capabilities.tools.list_changed is False
    by_name = {t.name: t for t in tools}
    assert list(by_name) == list(TOOLS)
    for name, (required, props) in TOOLS.items():
        schema = by_name[name].input_schema
        assert schema["type"] == "object"
        assert schema.get("required", []) == required, name
        expected = dict(props) if name in UNSCOPED else {**props, "branch": "string", "space": "string"}
        assert set(schema["properties"]) == set(expected), name
        for prop, kind in expected.items():
            assert schema["properties"][prop].get("type") == kind, (name, prop)
        if name in ("strata_guide", "strata_branch_list"):
            assert "required" not in schema

    texts = [x.content[0].text for x in r]
    assert [x.is_error for x in r] == [False, False, True, False, False, False, False, False, False, False, True]
    assert all(x.structured_content is None for x in r)
    assert json.loads(texts[0])["data"]["key"] == base64.b64encode(b"greeting").decode()
    assert json.loads(texts[1])["data"]["value"]["value"] == base64.b64encode(b"hello").decode()
    assert texts[2] == ("invalid arguments for `strata_kv_get`: unknown field `ttl`, expected one of "
                        "`branch`, `space`, `key`, `as_of`, `as_of_time`")
    assert json.loads(texts[5])["data"][0]["key"] == "a"
    assert [b["name"] for b in json.loads(texts[7])["data"]["items"]] == ["default", "exp"]
    assert texts[8].startswith("# Strata") and "`kv_scan`" in texts[8]
    assert json.loads(texts[9])["type"] == "kv_scan_result"
    assert json.loads(texts[10])["error"]["code"] == "invalid_argument.engine.kv_key"
    assert json.loads(texts[0])["data"]["commit"]["durability"] == "standard"


def test_protocol_version_is_echoed(tmp_path):
    for version in ("2024-11-05", "2025-03-26", "2025-06-18", "1999-01-01"):
        proc = run_lines(["--cache", "mcp", "serve"], [request(1, "initialize", {"protocolVersion": version})],
                         env=strata_env(tmp_path))
        assert answers(proc)[0]["result"]["protocolVersion"] == version
    proc = run_lines(["--cache", "mcp", "serve"], [request(1, "initialize", {})], env=strata_env(tmp_path))
    assert answers(proc)[0]["result"]["protocolVersion"] == "2025-06-18"


def test_a_number_past_the_double_range_is_a_parse_error_not_infinity(tmp_path):
    # serde_json, which reads the real server's lines, refuses 1e400 ("number out of range");
    # taken as infinity it was stored, then written back as `Infinity`, which is no JSON.
    edge = {"graph": "g", "src": "n", "edge_type": "e", "dst": "n"}
    lines = [INITIALIZE, tool_call(2, "strata_graph_create", {"graph": "g"}),
             tool_call(3, "strata_graph_add_node", {"graph": "g", "node_id": "n"}),
             tool_call(4, "strata_graph_add_edge", {**edge, "weight": 1e308}).replace("1e+308", "1e309"),
             tool_call(5, "strata_json_set", {"key": "d", "path": "$", "value": -1e308}).replace("-1e+308", "-1e400"),
             tool_call(6, "strata_graph_add_edge", {**edge, "weight": 1.7976931348623157e308}),
             tool_call(7, "strata_graph_neighbors", {"graph": "g", "node_id": "n"})]
    assert "1e309" in lines[3] and "-1e400" in lines[4]
    proc = run_lines(["--cache", "mcp", "serve"], lines, env=strata_env(tmp_path))
    out = answers(proc)
    assert out[3:5] == [{"jsonrpc": "2.0", "id": None,
                         "error": {"code": -32700, "message": "parse error: number out of range"}}] * 2
    edge_page = json.loads(out[-1]["result"]["content"][0]["text"], parse_constant=pytest.fail)  # strict JSON
    assert [item["edge"]["weight"] for item in edge_page["data"]["items"]] == [1.7976931348623157e308]


def test_minus_zero_is_read_as_the_engine_reads_it(tmp_path):
    # serde_json reads the literal -0 as the float -0.0 (Python: the integer 0): the real
    # engine keeps -0.0 in a document and refuses it where an unsigned integer is due.
    from stratadb import _stratadb

    engine = _stratadb.Handle.open_cache()
    engine.execute('{"type":"json_set","key":"d","path":"$","value":{"a":-0,"b":[-0],"c":0}}')
    want_doc = json.loads(engine.execute('{"type":"json_get","key":"d","path":"$"}'))["data"]["value"]["value"]
    with pytest.raises(ValueError) as refused:
        engine.execute('{"type":"kv_list","limit":-0}')
    engine.close()
    raw = ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}')
    lines = [INITIALIZE, raw % (2, "strata_json_set", '{"key":"d","path":"$","value":{"a":-0,"b":[-0],"c":0}}'),
             raw % (3, "strata_json_get", '{"key":"d","path":"$"}'), raw % (4, "strata_kv_list", '{"limit":-0}')]
    out = answers(run_lines(["--cache", "mcp", "serve"], lines, env=strata_env(tmp_path)))
    text = out[2]["result"]["content"][0]["text"]
    assert '"value":{"a":-0.0,"b":[-0.0],"c":0}' in text
    assert json.loads(text)["data"]["value"]["value"] == want_doc
    assert out[3]["result"] == {"content": [{"type": "text", "text": "invalid arguments for `strata_kv_list`: "
                                             + str(refused.value).removeprefix("invalid command: ")}],
                                "isError": True}


def test_malformed_lines_each_get_one_answer(tmp_path):
    lines = [
        INITIALIZE,
        INITIALIZED,                                            # notification: no answer
        b"\xff\xfe not utf-8",                                 # -32700
        "{not json",                                            # -32700
        '{"jsonrpc":"2.0","id":2,"method":"ping"} trailing',    # -32700
        "NaN",                                                  # -32700 (not JSON)
        "",                                                     # blank: ignored
        "[1]",                                                  # batch of a non-request: [-32600]
        "[]",                                                   # empty batch: -32600
        "5",                                                    # not a request: -32600
        '"x"',                                                  # not a request: -32600
        '{"id":3,"method":"ping"}',                             # no jsonrpc: -32600
        '{"jsonrpc":"1.0","id":4,"method":"ping"}',             # wrong jsonrpc: -32600
        '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',       # object id: -32600, id null
        '{"jsonrpc":"2.0","id":[1],"method":"ping"}',           # array id: -32600, id null
        '{"jsonrpc":"2.0","id":5}',                             # no method: -32600
        '{"jsonrpc":"2.0","id":6,"method":7}',                  # method not a string: -32600
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}',  # notification: no answer
        request(7, "resources/list"),                           # -32601
        request(8, "ping"),                                     # {}
        request(None, "ping"),                                  # id null answered with id null
        request("s-9", "tools/call", {"arguments": {}}),         # -32602 no name
        request(10, "tools/call", {"name": 5}),                 # -32602
        tool_call(11, "strata_nope", {}),                       # -32602 unknown tool
        request(12, "tools/call", {"name": "strata_kv_list", "arguments": [1]}),  # -32602
        request(13, "tools/call", {"name": "strata_kv_list", "arguments": None}),  # arguments null = {}
        request(14, "tools/call", {"name": "strata_kv_list"}),  # arguments absent = {}
        '[{"jsonrpc":"2.0","id":15,"method":"ping"},{"jsonrpc":"2.0","method":"x"},5]',  # batch
        request(16, "tools/list"),
    ]
    proc = run_lines(["--cache", "mcp", "serve"], lines, env=strata_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = answers(proc)
    codes = [(a.get("id"), a.get("error", {}).get("code")) if isinstance(a, dict) else
             [(x.get("id"), x.get("error", {}).get("code")) for x in a] for a in out]
    assert codes == [
        (1, None),
        (None, -32700), (None, -32700), (None, -32700), (None, -32700),
        [(None, -32600)], (None, -32600), (None, -32600), (None, -32600),
        (3, -32600), (4, -32600), (None, -32600), (None, -32600), (5, -32600), (6, -32600),
        (7, -32601), (8, None), (None, None),
        ("s-9", -32602), (10, -32602), (11, -32602), (12, -32602), (13, None), (14, None),
        [(15, None), (None, -32600)],
        (16, None),
    ]
    by_id = {a["id"]: a for a in out if isinstance(a, dict) and a.get("id") is not None}
    assert by_id[7]["error"]["message"] == "method `resources/list` is not supported"
    assert by_id["s-9"]["error"]["message"] == "tools/call requires a `name`"
    assert by_id[11]["error"]["message"] == "unknown tool `strata_nope`; list tools with tools/list"
    assert by_id[12]["error"]["message"] == "`arguments` must be an object"
    assert by_id[8]["result"] == {}
    assert json.loads(by_id[13]["result"]["content"][0]["text"])["type"] == "keys_page"
    assert len(by_id[16]["result"]["tools"]) == 20
    stderr = proc.stderr.decode()
    assert "Traceback" not in stderr


def test_calls_before_initialize_are_answered(tmp_path):
    """Like the real server, nothing waits for the handshake: each request is answered as it comes."""
    lines = [request(1, "tools/list"), tool_call(2, "strata_kv_put", {"key": "k", "value": "v"}),
             tool_call(3, "strata_kv_get", {"key": "k"}), INITIALIZE]
    out = answers(run_lines(["--cache", "mcp", "serve"], lines, env=strata_env(tmp_path)))
    assert [a["id"] for a in out] == [2 - 1, 2, 3, 1]
    assert len(out[0]["result"]["tools"]) == 20
    assert out[1]["result"]["isError"] is False
    assert json.loads(out[2]["result"]["content"][0]["text"])["data"]["found"] is True


def test_every_request_read_before_eof_is_answered(tmp_path):
    n = 400
    lines = [INITIALIZE] + [tool_call(i, "strata_kv_put", {"key": f"k{i}", "value": "v"}) for i in range(2, n)]
    proc = run_lines([str(tmp_path / "db"), "mcp", "serve"], lines, env=strata_env(tmp_path))
    out = answers(proc)
    assert [a["id"] for a in out] == list(range(1, 2)) + list(range(2, n))
    assert all(a["result"]["isError"] is False for a in out[1:])
    # and they are durable: a second server sees them all
    proc = run_lines([str(tmp_path / "db"), "mcp", "serve"],
                     [tool_call(1, "strata_command", {"command": {"type": "kv_count"}})], env=strata_env(tmp_path))
    assert json.loads(answers(proc)[0]["result"]["content"][0]["text"])["data"] == n - 2


def test_stdout_carries_only_protocol(tmp_path):
    proc = run_lines([str(tmp_path / "db"), "mcp", "serve"], [INITIALIZE, request(2, "tools/list")],
                     env=strata_env(tmp_path))
    assert len(answers(proc)) == 2
    assert b"serving" in proc.stderr and b"serving" not in proc.stdout
    assert str(tmp_path).encode() not in proc.stderr


def test_an_oversized_line_is_answered_and_skipped(tmp_path):
    """A line over 16 MiB is never held whole: -32600 (id null), and the next line is served."""
    from memstrata.strata.mcp import MAX_LINE_BYTES

    pad = "x" * (MAX_LINE_BYTES + 1024)
    huge = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": pad}})
    just_fits = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping",
                            "params": {"pad": "y" * (MAX_LINE_BYTES - 100)}})
    proc = run_lines(["--cache", "mcp", "serve"], [huge, request(2, "ping"), just_fits], env=strata_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = answers(proc)
    assert out[0] == {"jsonrpc": "2.0", "id": None,
                      "error": {"code": -32600, "message": f"invalid request: a message may hold at most "
                                                           f"{MAX_LINE_BYTES} bytes"}}
    assert out[1:] == [{"jsonrpc": "2.0", "id": 2, "result": {}}, {"jsonrpc": "2.0", "id": 3, "result": {}}]


def test_the_guide_says_what_every_supported_command_does():
    # An agent picks strata_command's commands from this catalog: a line that only says
    # "graph command" tells it nothing about what the command is for.
    from memstrata.strata.guide import SUMMARIES, guide_markdown
    from memstrata.strata.wire import SPECS

    assert sorted(set(SPECS) - set(SUMMARIES)) == []
    lines = [line for line in guide_markdown().splitlines() if line.startswith("- `")]
    assert not [line for line in lines if line.endswith(" command")]
