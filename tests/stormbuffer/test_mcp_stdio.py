"""``stormbuffer-mcp`` over real stdio: the MCP SDK's own client, and raw JSON-RPC lines."""

from __future__ import annotations

import fcntl
import json
import subprocess
import time

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from .conftest import MCP, SOURCE, WAIT, assert_clean
from .helpers import add_human_record, hand_written

pytestmark = pytest.mark.timeout(180)

TOOLS = ["memory_recall", "memory_get", "memory_remember", "memory_update", "memory_forget"]


async def sdk_session(sbuf, flags, steps, errlog):
    """Run ``steps(session)`` inside one SDK client session; returns its result."""
    params = StdioServerParameters(command=MCP, args=["--stdio", *flags], cwd=str(sbuf.project), env=sbuf.env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        return init, await steps(session)


def run_sdk(sbuf, tmp_path, flags, steps):
    with open(tmp_path / "mcp.stderr", "w") as errlog:
        init, out = anyio.run(sdk_session, sbuf, flags, steps, errlog)
    stderr = (tmp_path / "mcp.stderr").read_text()
    assert "Traceback" not in stderr
    return init, out


def envelope_of(result) -> dict:
    assert len(result.content) == 1 and result.content[0].type == "text"
    env = json.loads(result.content[0].text)
    assert env == result.structured_content
    assert result.is_error is (not env["ok"])
    return env


def test_end_to_end_candidate_approval_and_cited_recall(sbuf, tmp_path):
    """The product's smoke test: remember over MCP, not recalled, `sbuf approve`, recalled and cited."""
    sbuf.init()

    async def steps(session):
        tools = (await session.list_tools()).tools
        remembered = envelope_of(await session.call_tool("memory_remember", {
            "title": "Release constraint", "kind": "decision", "body": "Releases ship on Tuesdays only.\n",
            "source": SOURCE, "tags": ["release"]}))
        record_id = remembered["result"]["record_id"]
        before = envelope_of(await session.call_tool("memory_recall", {"query": "release constraint"}))
        got = envelope_of(await session.call_tool("memory_get", {"id": record_id}))
        candidate = await session.read_resource(f"stormbuffer://candidate/{record_id}")
        approved = await anyio.to_thread.run_sync(lambda: sbuf.ok("--project", "approve", record_id))
        after = envelope_of(await session.call_tool("memory_recall", {"query": "release constraint",
                                                                       "budget": 256}))
        scope = await session.read_resource("stormbuffer://scope/project:demo-project/records")
        templates = (await session.list_resource_templates()).resource_templates
        resources = (await session.list_resources()).resources
        update = envelope_of(await session.call_tool("memory_update", {
            "id": record_id, "body": "Releases ship on Wednesdays.\n", "source": SOURCE}))
        forget = envelope_of(await session.call_tool("memory_forget", {"id": record_id}))
        gone = envelope_of(await session.call_tool("memory_recall", {"query": "release constraint"}))
        return (tools, remembered, before, got, candidate, approved, after, scope, templates, resources, update,
                forget, gone)

    init, out = run_sdk(sbuf, tmp_path, ["--project", "--allow-writes"], steps)
    (tools, remembered, before, got, candidate, approved, after, scope, templates, resources, update, forget,
     gone) = out
    assert init.server_info.name == "stormbuffer-mcp"
    assert "project store" in init.instructions
    assert [t.name for t in tools] == TOOLS
    assert remembered["operation"] == "remember" and remembered["result"]["outcome"] == "requires_approval"
    record_id = remembered["result"]["record_id"]
    assert before["result"]["blocks"] == []
    assert got["result"]["status"] == "candidate" and "path" not in json.dumps(got)
    assert json.loads(candidate.contents[0].text)["id"] == record_id
    assert approved == f"{record_id}\taccepted\tactive\n"
    blocks, receipt = after["result"]["blocks"], after["result"]["receipt"]
    assert [b["record_id"] for b in blocks] == [record_id]
    assert receipt["budget"] == 256 and receipt["used_tokens"] == blocks[0]["token_count"] == 5
    assert [r["id"] for r in json.loads(scope.contents[0].text)] == [record_id]
    assert [t.uri_template for t in templates] == ["stormbuffer://record/{id}",
                                                   "stormbuffer://scope/{scope}/records",
                                                   "stormbuffer://candidate/{id}"]
    assert resources == []
    assert update["result"]["related_id"] == record_id and update["result"]["status"] == "candidate"
    assert forget == {"version": 1, "operation": "archive", "ok": True,
                      "result": {"outcome": "accepted", "id": record_id, "status": "archived"}}
    assert gone["result"]["blocks"] == []


def test_invoke_and_mcp_give_the_same_envelope(sbuf, tmp_path):
    sbuf.init()
    sbuf.active()
    sbuf.active(title="Deploy checklist", body="check the release notes before a deploy\n")
    requests = [("context", "memory_recall", {"query": "release constraint", "budget": 256}),
                ("context", "memory_recall", {"query": "deploy", "limit": 1, "scopes": ["project:demo-project"]}),
                ("context", "memory_recall", {"query": "q", "colour": 1}),
                ("get", "memory_get", {"id": "not-an-id"})]
    cli = [sbuf.invoke(op, {"version": 1, **args})[0] for op, _, args in requests]

    async def steps(session):
        return [envelope_of(await session.call_tool(tool, args)) for _, tool, args in requests]

    _, mcp = run_sdk(sbuf, tmp_path, ["--project"], steps)
    for a, b in zip(cli, mcp):
        for env in (a, b):
            if env["ok"] and "receipt" in env["result"]:
                del env["result"]["receipt"]["receipt_id"], env["result"]["receipt"]["retrieved_at"]
        assert a == b


def test_tools_are_listed_without_a_grant_but_writes_are_refused_first(sbuf, session):
    s = session("--project")  # the store is not even initialized: the gate comes first
    init = s.initialize()
    assert init["capabilities"] == {"tools": {}, "resources": {}}
    tools = s.request("tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == TOOLS
    hints = {t["name"]: t["annotations"] for t in tools}
    assert hints["memory_forget"]["destructiveHint"] is True and hints["memory_recall"]["readOnlyHint"] is True
    assert tools[2]["inputSchema"]["required"] == ["title", "kind", "body", "source"]
    for tool, args in (("memory_remember", {}), ("memory_update", {"path": "/etc"}), ("memory_forget", None)):
        operation = {"memory_remember": "remember", "memory_update": "update", "memory_forget": "archive"}[tool]
        assert s.envelope(tool, args) == {
            "version": 1, "operation": operation, "ok": False,
            "error": {"code": "permission_denied",
                      "message": "MCP write tools are disabled; restart with an explicit host write grant"}}
    assert s.envelope("memory_recall", {"query": "x"})["error"]["code"] == "not_initialized"
    _, stderr, code = s.close()
    assert code == 0 and b"Traceback" not in stderr
    assert not sbuf.store.exists()  # connecting never initializes a store


def test_arguments_reach_the_protocol_checks(sbuf, session):
    sbuf.init()
    s = session("--project", "--allow-writes")
    s.initialize()
    assert s.envelope("memory_recall", {})["error"] == {"code": "invalid_request",
                                                         "message": "field `query` must be a bounded string"}
    assert s.envelope("memory_recall", {"query": "x" * 3000})["error"]["message"] == "query is too long"
    assert s.envelope("memory_recall", None)["error"]["code"] == "invalid_request"
    assert s.envelope("memory_recall", {"query": "x", "db_path": "/tmp"})["error"]["code"] == "path_denied"
    # matched as written, as Stormbuffer's ensure_keys does: "Path" is only an unknown field
    assert s.envelope("memory_recall", {"query": "x", "Path": 2})["error"] == {
        "code": "invalid_request", "message": "request contains an unknown field"}
    # version and operation are the adapter's: a client cannot pick another
    env = s.envelope("memory_recall", {"query": "x", "version": 7, "operation": "archive"})
    assert env["ok"] is True and env["operation"] == "context"
    assert s.envelope("memory_remember", {"title": "T", "kind": "fact", "body": "b", "source": SOURCE,
                                          "actor": "human"})["error"]["code"] == "permission_denied"
    assert s.envelope("memory_remember", {"title": "T", "kind": "fact", "body": "b", "source": SOURCE,
                                          "approved": True})["error"]["code"] == "permission_denied"
    big = s.envelope("memory_remember", {"title": "T", "kind": "fact", "body": "b" * 70_000, "source": SOURCE})
    assert big["error"]["message"] == "field `body` must be a bounded string"
    tags = s.envelope("memory_remember", {"title": "T", "kind": "fact", "body": "b", "source": SOURCE,
                                          "tags": ["t"] * 200})
    assert tags["error"]["message"] == "record collection is too large"
    scopes = s.envelope("memory_recall", {"query": "x", "scopes": ["global"] * 20})
    assert scopes["error"]["message"] == "scope filter is out of bounds"
    for env in (big, tags, scopes):
        assert_clean(env["error"]["message"], sbuf)
    assert sbuf.record_files() == []


def test_jsonrpc_errors_for_malformed_lines(sbuf, session):
    sbuf.init()
    s = session("--project")
    s.initialize()
    cases = [
        (b"this is not json\n", {"id": None, "code": -32700}),
        (b"\xff\xfe{\"jsonrpc\":\"2.0\"}\n", {"id": None, "code": -32700}),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"\n', {"id": None, "code": -32700}),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}\n', {"id": None, "code": -32700}),
        # Nested past serde_json's recursion limit (127 containers): rmcp cannot read the line.
        (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_recall","arguments":'
         b'{"query":"x","scopes":' + b"[" * 125 + b"]" * 125 + b'}}}\n', {"id": None, "code": -32700}),
        (b"42\n", {"id": None, "code": -32600}),
        (b'"text"\n', {"id": None, "code": -32600}),
        (b"[]\n", {"id": None, "code": -32600}),
        (b'{"id":5,"method":"ping"}\n', {"id": 5, "code": -32600}),
        (b'{"jsonrpc":"1.0","id":6,"method":"ping"}\n', {"id": 6, "code": -32600}),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n', {"id": None, "code": -32600}),
        (b'{"jsonrpc":"2.0","id":[1],"method":"ping"}\n', {"id": None, "code": -32600}),
        (b'{"jsonrpc":"2.0","id":7,"method":3}\n', {"id": 7, "code": -32600}),
        (b'{"jsonrpc":"2.0","id":8}\n', {"id": 8, "code": -32600}),
        (b'{"jsonrpc":"2.0","id":9,"method":"no/such"}\n', {"id": 9, "code": -32601}),
        (b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"memory_delete"}}\n',
         {"id": 10, "code": -32602, "message": "tool not found"}),
        (b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"memory_recall","arguments":[1]}}\n',
         {"id": 11, "code": -32602}),
        (b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":"x"}\n', {"id": 12, "code": -32600}),
        (b'{"jsonrpc":"2.0","id":13,"method":"tools/call","params":[1]}\n', {"id": 13, "code": -32602}),
        (b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{}}\n', {"id": 14, "code": -32602}),
    ]
    for line, expected in cases:
        s.send_raw(line)
        reply = s.recv()
        assert reply["jsonrpc"] == "2.0" and reply["id"] == expected["id"], (line, reply)
        assert reply["error"]["code"] == expected["code"], (line, reply)
        if "message" in expected:
            assert reply["error"]["message"] == expected["message"]
        assert_clean(reply["error"]["message"], sbuf)
    # notifications and client responses get no reply; blank lines are skipped
    s.send_raw(b'\n   \n{"jsonrpc":"2.0","method":"notifications/whatever"}\n'
               b'{"jsonrpc":"2.0","id":99,"result":{}}\n')
    assert s.request("ping") == {"jsonrpc": "2.0", "id": s._next_id, "result": {}}
    # a batch answers its requests, in order, and skips its notifications
    s.send([{"jsonrpc": "2.0", "id": "a", "method": "ping"}, {"jsonrpc": "2.0", "method": "x/y"},
            {"jsonrpc": "2.0", "id": "b", "method": "nope"}, 5])
    batch = s.recv()
    assert [r["id"] for r in batch] == ["a", "b", None]
    assert batch[0]["result"] == {} and batch[1]["error"]["code"] == -32601 and batch[2]["error"]["code"] == -32600
    s.send([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
    assert s.request("ping")["result"] == {}
    rest, stderr, code = s.close()
    assert rest == [] and code == 0 and b"Traceback" not in stderr


def test_an_oversized_line_is_answered_and_the_session_goes_on(sbuf, session):
    s = session()
    s.initialize()
    s.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (9 * 1024 * 1024) + b'"}}\n')
    reply = s.recv()
    assert reply["id"] is None and reply["error"]["code"] == -32600
    assert s.request("ping")["result"] == {}


def test_protocol_versions(sbuf, session):
    for asked, answered in (("2024-11-05", "2024-11-05"), ("2025-11-25", "2025-11-25"),
                            ("2026-07-28", "2026-07-28"), ("1999-01-01", "2025-06-18")):
        s = session()
        assert s.initialize(asked)["protocolVersion"] == answered
        s.kill()


def test_resources(sbuf, session):
    sbuf.init()
    sbuf.ok("init")
    active = sbuf.active()
    candidate = sbuf.remember("Draft", "a draft\n")["record_id"]
    human = add_human_record(sbuf, title="Secret", body="only people\n")
    s = session("--project")
    s.initialize()

    def failure(uri):
        reply = s.read(uri)
        assert reply["error"]["code"] == -32602, reply
        return reply["error"]["message"]

    ok = s.read(f"stormbuffer://record/{active}")["result"]["contents"][0]
    assert ok["mimeType"] == "application/json" and json.loads(ok["text"])["id"] == active
    assert json.loads(s.read(f"stormbuffer://record/{candidate}")["result"]["contents"][0]["text"])["status"] == \
        "candidate"
    assert failure(f"stormbuffer://candidate/{active}") == "could not read the requested resource: not_found"
    assert failure(f"stormbuffer://record/{human}") == "could not read the requested resource: access_denied"
    assert failure("stormbuffer://record/") == "could not read the requested resource: invalid_request"
    assert failure("stormbuffer://record/a/b") == "could not read the requested resource: invalid_request"
    assert failure("file:///etc/passwd") == "could not read the requested resource: invalid_request"
    assert failure("stormbuffer://elsewhere") == "could not read the requested resource: not_found"
    assert failure("stormbuffer://scope/project:other/records") == \
        "could not read the requested resource: scope_denied"
    assert failure("stormbuffer://scope/not a scope/records") == \
        "could not read the requested resource: invalid_request"
    assert failure("stormbuffer://record/" + "x" * 5000) == "resource URI is too long"
    assert json.loads(s.read("stormbuffer://scope/global/records")["result"]["contents"][0]["text"]) == []
    records = json.loads(s.read("stormbuffer://scope/project:demo-project/records")["result"]["contents"][0]["text"])
    assert [r["id"] for r in records] == [active]  # active agent records only
    for n in range(101):
        hand_written(sbuf.records, title=f"Bulk {n}", body=f"bulk {n}\n")
    assert failure("stormbuffer://scope/project:demo-project/records") == \
        "could not read the requested resource: output_too_large"


def test_tool_output_is_bounded(sbuf, session):
    sbuf.init()
    for n in range(3):
        hand_written(sbuf.records, title=f"Huge {n}", body=("y" * 60_000) + f" huge{n}\n")
    s = session("--project")
    s.initialize()
    env = s.envelope("memory_recall", {"query": "huge0 huge1 huge2"})
    assert env == {"version": 1, "operation": "context", "ok": False,
                   "error": {"code": "output_too_large", "message": "response exceeds the bounded MCP tool output"}}
    assert s.envelope("memory_recall", {"query": "huge1"})["ok"] is True


def test_eof_answers_every_request_already_read(sbuf, session):
    sbuf.init()
    sbuf.active()
    s = session("--project")
    s.initialize()
    burst = b"".join(json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                 "params": {"name": "memory_recall", "arguments": {"query": "release"}}}).encode()
                     + b"\n" for n in range(40))
    s.send_raw(burst + b"garbage\n")
    rest, stderr, code = s.close()
    assert [r["id"] for r in rest] == [*range(40), None] and code == 0
    assert all(r["result"]["structuredContent"]["ok"] for r in rest[:40])


def test_a_queued_request_can_be_cancelled(sbuf, session):
    sbuf.init()
    s = session("--project")
    s.initialize()
    with open(sbuf.store / "projection.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the first recall waits on it
        s.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "memory_recall", "arguments": {"query": "x"}}})
        s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "memory_recall", "arguments": {"query": "x"}}})
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        first = s.recv(timeout=WAIT)
    assert first["id"] == 1
    assert first["result"]["structuredContent"]["error"] == {
        "code": "conflict", "message": "the SQLite projection is busy; retry the operation"}
    assert s.recv() == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "request was cancelled"}}


@pytest.mark.parametrize("args, code, text", [
    (["--help"], 0, "usage: stormbuffer-mcp --stdio"),
    (["-h"], 0, "usage: stormbuffer-mcp --stdio"),
    (["--version"], 0, "stormbuffer-mcp "),
    (["-V"], 0, "stormbuffer-mcp "),
    ([], 2, "stormbuffer-mcp: --stdio is required"),
    (["--stdio", "--verbose"], 2, "stormbuffer-mcp: unknown argument"),
    (["--stdio", "--global", "--project"], 2, "stormbuffer-mcp: --project conflicts with --global"),
    (["--stdio", "--project", "--global"], 2, "stormbuffer-mcp: --global conflicts with --project"),
])
def test_flags(sbuf, args, code, text):
    proc = subprocess.run([MCP, *args], capture_output=True, text=True, cwd=sbuf.project, env=sbuf.env,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == code
    assert text in (proc.stdout if code == 0 else proc.stderr)


def test_no_home_cannot_start(sbuf):
    env = {k: v for k, v in sbuf.env.items() if k not in ("HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")}
    proc = subprocess.run([MCP, "--stdio"], capture_output=True, text=True, cwd=sbuf.project, env=env, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and proc.stderr == "stormbuffer-mcp: could not start the stdio adapter\n"
    assert proc.stdout == ""


def test_global_mode_instructions(sbuf, session):
    s = session()
    assert "global store" in s.initialize()["instructions"]


def test_a_late_cancellation_does_not_refuse_a_request_reusing_its_id(sbuf, session):
    """A cancellation that arrives after its request was answered names nothing: a later
    request with that id (ids may be reused once answered) is served, not "cancelled"."""
    sbuf.init()
    s = session("--project")
    s.initialize()
    s.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    assert s.recv() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}})  # never sent
    s.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    s.send({"jsonrpc": "2.0", "id": 8, "method": "ping"})
    assert [s.recv(), s.recv()] == [{"jsonrpc": "2.0", "id": 7, "result": {}},
                                    {"jsonrpc": "2.0", "id": 8, "result": {}}]


def test_the_reader_stays_a_bounded_distance_ahead_of_the_answers(sbuf):
    """A client that sends without reading answers fills its pipes, not the server's memory."""
    import os
    import time

    from memstrata.stormbuffer.mcp import MAX_QUEUED_LINES

    sbuf.init()
    proc = subprocess.Popen([MCP, "--stdio", "--project"], cwd=sbuf.project, env=sbuf.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        # Answers nobody reads: the worker soon blocks writing the stdout pipe.
        init = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        lists = json.dumps(init).encode() + b"\n" + b"".join(
            json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode() + b"\n" for n in range(200))
        proc.stdin.write(lists)
        proc.stdin.flush()
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 16_000}}).encode()
        total = 1200 * (len(line) + 1)   # ~19 MB offered
        bound = (MAX_QUEUED_LINES + 8) * (len(line) + 1) + 2 * 1024 * 1024  # queue, buffers and pipes
        fd = proc.stdin.fileno()
        os.set_blocking(fd, False)
        data = memoryview((line + b"\n") * 1200)
        written, stalled_since = 0, None
        while written < total:
            try:
                written += os.write(fd, data[written:])
                stalled_since = None
            except BlockingIOError:  # the server stopped reading (or is slow): give it a bounded while
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 3:
                    break
                time.sleep(0.01)
        assert written < bound < total, (written, bound)
    finally:
        proc.kill()
        proc.wait(timeout=WAIT)


def test_a_leading_byte_order_mark_is_ignored(sbuf, session):
    """rmcp strips one UTF-8 BOM from the start of each line before parsing it."""
    s = session()
    bom = b"\xef\xbb\xbf"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    s.send_raw(bom + json.dumps(init).encode() + b"\r\n")
    assert s.recv()["result"]["serverInfo"]["name"] == "stormbuffer-mcp"
    s.send_raw(bom + b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
    assert s.recv() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    # Only one is stripped: a second one is not JSON.
    s.send_raw(bom + bom + b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n')
    assert s.recv()["error"]["code"] == -32700
    assert s.request("ping")["result"] == {}


def test_rmcp_default_answers_for_prompts_and_completion(sbuf, session):
    """rmcp's ServerHandler defaults, which Stormbuffer does not override: empty prompt
    and completion lists (no cursor, no total, no hasMore); the rest stay unknown methods."""
    s = session()
    init = s.initialize()
    assert "prompts" not in init["capabilities"] and "completions" not in init["capabilities"]
    assert s.request("prompts/list") == {"jsonrpc": "2.0", "id": s._next_id, "result": {"prompts": []}}
    assert s.request("prompts/list", {"cursor": "x"})["result"] == {"prompts": []}
    complete = s.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"},
                                                 "argument": {"name": "a", "value": "v"}})
    assert complete["result"] == {"completion": {"values": []}}
    for method in ("logging/setLevel", "resources/subscribe", "resources/unsubscribe", "prompts/get"):
        assert s.request(method, {})["error"]["code"] == -32601, method


def test_request_ids_must_fit_a_signed_64_bit_integer(sbuf, session):
    """rmcp's NumberOrString holds an i64: a larger id is no message (-32600, id null)."""
    s = session()
    s.send_raw(b'{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}\n')  # before initialize too
    assert s.recv() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request"}}
    s.initialize()
    for ident in (2**63, -(2**63) - 1, 10**30):
        s.send_raw(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % ident)
        assert s.recv() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request"}}
    for ident in (2**63 - 1, -(2**63)):
        s.send_raw(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % ident)
        assert s.recv() == {"jsonrpc": "2.0", "id": ident, "result": {}}


def test_minus_zero_in_arguments_is_no_integer_as_rmcp_reads_it(sbuf, session):
    # rmcp's serde_json reads the literal -0 as the float -0.0, which the core refuses as a limit.
    sbuf.init()
    s = session("--project")
    s.initialize()
    s.send_raw(b'{"jsonrpc":"2.0","id":"m","method":"tools/call","params":{"name":"memory_recall",'
               b'"arguments":{"query":"x","limit":-0}}}\n')
    reply = s.recv()
    assert reply["id"] == "m" and reply["result"]["isError"] is True
    assert reply["result"]["structuredContent"]["error"] == {"code": "invalid_request",
                                                             "message": "field `limit` must be an integer"}


def test_a_write_waits_for_another_writer_instead_of_failing(sbuf, session):
    # two agents (or an agent and a person's `sbuf approve`) writing at once: the
    # mutation lock is held for one write's milliseconds, so the second write waits
    # its turn rather than answering `conflict` at random
    sbuf.init()
    s = session("--project", "--allow-writes")
    s.initialize()
    assert s.envelope("memory_recall", {"query": "warm"})["ok"]
    with open(sbuf.store / "locks" / "mutation.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        s.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "memory_remember",
            "arguments": {"title": "T", "kind": "fact", "body": "b", "source": SOURCE}}})
        time.sleep(0.5)  # the server has read the request and is waiting for the lock
    reply = s.recv()
    assert reply["id"] == 7
    assert reply["result"]["structuredContent"]["result"]["outcome"] == "requires_approval"
