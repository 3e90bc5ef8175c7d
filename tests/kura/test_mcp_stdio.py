"""``kura mcp`` driven by the MCP SDK's own client over a real stdio subprocess."""

from __future__ import annotations

import json

import anyio
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from .conftest import KURA

pytestmark = pytest.mark.timeout(120)


async def _session(kura, errlog, calls):
    params = StdioServerParameters(command=KURA, args=["mcp"], env=kura.env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        results = [await session.call_tool(name, args) for name, args in calls]
        return init, tools, results


def test_kura_mcp_over_stdio(kura, docs, tmp_path):
    kura.ok("add", "notes", str(docs))
    kura.ok("add", "empty")
    kura.ok("add", "broken")
    (kura.home / "broken" / "data.db").write_bytes(b"garbage " * 1000)
    calls = [
        ("list_rag", {}),
        ("search_rag", {"db": " notes ", "q": "  AuthService parse_args "}),
        ("search_rag", {"db": "notes", "q": "alice bob city", "limit": 1}),
        ("search_rag", {"db": "notes", "q": "alice bob city", "limit": "abc"}),
        ("search_rag", {"db": "notes", "q": "alice bob city", "limit": 0}),
        ("search_rag", {"db": "notes", "q": "alice bob city", "limit": 500}),
        ("search_rag", {"db": "notes", "q": "backoff", "mode": "Keyword"}),
        ("search_rag", {"db": "notes", "q": "nothingmatcheshere"}),
        ("search_rag", {"db": "empty", "q": "x"}),
        ("search_rag", {"db": "x", "q": "y"}),
        ("search_rag", {"db": "notes", "q": "   "}),
        ("search_rag", {"db": "notes"}),
        ("search_rag", {"db": "notes", "q": "x", "mode": "semantic"}),
        ("search_rag", {"db": "broken", "q": "x"}),
        ("search_rag", {"db": "notes", "q": "backoff " * 1500}),
    ]
    errlog_path = tmp_path / "mcp.stderr"
    with open(errlog_path, "w") as errlog:
        init, tools, r = anyio.run(_session, kura, errlog, calls)

    assert init.server_info.name == "kuradb"
    text = init.instructions
    assert "list_rag" in text and "search_rag" in text and "no conversation history" in text
    assert set(tools) == {"list_rag", "search_rag"}
    schema = tools["search_rag"].input_schema
    assert schema["properties"]["limit"]["type"] == "integer" and schema["properties"]["q"]["type"] == "string"
    # db and q are required; no property claims a null default (clients read that as optional).
    assert schema["required"] == ["db", "q"]
    assert {name: prop.get("default") for name, prop in schema["properties"].items()} == {
        "db": None, "q": None, "limit": 10, "mode": "keyword"}
    assert all("default" not in schema["properties"][name] for name in ("db", "q"))
    # Every casing the server takes passes a host's check against the schema; other modes do not.
    for mode, valid in (("keyword", True), ("KEYWORD", True), ("Keyword", True), ("semantic", False),
                        ("keywords", False)):
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors({"db": "d", "q": "x", "mode": mode}))
        assert (not errors) == valid, mode

    registry = json.loads((kura.home / "db.json").read_text())
    assert r[0].structured_content == {"loaded": ["notes", "empty"], "registered": registry}
    keyword = r[1].structured_content["keyword"]
    assert keyword[0]["source"] == "code/auth.py" and keyword[0]["matches"][0]["chunk"] >= 1
    assert json.loads(r[1].content[0].text) == r[1].structured_content

    def n_matches(res):
        return sum(len(g["matches"]) for g in res.structured_content.get("keyword", []))
    assert n_matches(r[2]) == 1
    assert n_matches(r[3]) == n_matches(r[4]) == n_matches(r[5]) == 3  # invalid limits -> 10
    assert r[6].structured_content["keyword"][0]["source"] == "notes.md"
    assert r[7].structured_content == {} and r[8].structured_content == {}
    assert not any(x.is_error for x in r[:9])

    errors = {i: x.content[0].text for i, x in enumerate(r) if x.is_error}
    assert errors[9] == 'invalid argument: "x" not exist'
    assert errors[10] == errors[11] == "invalid argument: q is required"
    assert errors[12] == 'invalid argument: mode "semantic" not supported (only "keyword")'
    assert errors[13].startswith('invalid argument: "broken" not loaded')
    assert not r[14].is_error  # a 12 KB query is answered, not refused
    stderr = errlog_path.read_text()
    assert "broken" in stderr  # skipped, and said so on stderr (never on the protocol stream)


def test_kura_mcp_follows_add_and_remove_while_it_runs(kura, docs, tmp_path):
    """A host keeps one stdio server for a whole session: a database added meanwhile is served,
    and one removed is never served again."""
    kura.ok("add", "old", str(docs))

    async def run():
        params = StdioServerParameters(command=KURA, args=["mcp"], env=kura.env)
        with open(tmp_path / "err", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                before = await s.call_tool("search_rag", {"db": "old", "q": "backoff"})
                await anyio.to_thread.run_sync(kura.ok, "add", "new", str(docs))
                await anyio.to_thread.run_sync(kura.ok, "remove", "old", "--yes")
                listed = await s.call_tool("list_rag", {})
                added = await s.call_tool("search_rag", {"db": "new", "q": "backoff"})
                removed = await s.call_tool("search_rag", {"db": "old", "q": "backoff"})
                return before, listed, added, removed

    before, listed, added, removed = anyio.run(run)
    assert before.structured_content["keyword"]
    assert listed.structured_content["loaded"] == ["new"]
    assert added.structured_content["keyword"] == before.structured_content["keyword"]
    assert removed.is_error and removed.content[0].text == 'invalid argument: "old" not exist'


def test_kura_mcp_runs_no_watcher(kura, tmp_path):
    """stdio serves the index as it is; it does not index files dropped meanwhile."""
    kura.ok("add", "drop")
    (kura.home / "drop" / "inbox" / "late.md").write_text("wombat", encoding="utf-8")
    with open(tmp_path / "err", "w") as errlog:
        _, _, r = anyio.run(_session, kura, errlog, [("search_rag", {"db": "drop", "q": "wombat"})])
    assert r[0].structured_content == {}
