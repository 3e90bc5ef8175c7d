"""Several servers on one durable database at once, as the real engine allows.

Two agent hosts configured with the same ``strata /abs/db mcp serve`` each
start a server.  The real engine serves both: one commit clock across the
processes (every commit gets a version above every earlier commit of
either), each sees the other's committed writes on its next command, two
writers of one key both commit (the later one wins), and an event log stays
one gapless hash chain.  A SIGKILL of one server leaves the other working
and the database whole.

The servers here run this checkout's code (``python -m`` with this
checkout first on the path), not whatever ``strata`` script is installed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import memstrata
from memstrata.strata.engine import Engine
from memstrata.strata.mcp import StrataServer
from memstrata.strata.store import StrataStore

from .conftest import command_runner, strata_env, tool_call

pytestmark = pytest.mark.timeout(240)

CODE_ROOT = str(Path(memstrata.__file__).resolve().parent.parent)


class Server:
    """One ``strata DB mcp serve`` process, answering tool calls one at a time."""

    def __init__(self, db: Path, tmp_path: Path):
        env = strata_env(tmp_path, PYTHONPATH=CODE_ROOT)
        self.proc = subprocess.Popen([sys.executable, "-m", "memstrata.strata.cli", str(db), "mcp", "serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, cwd=tmp_path)
        self.ids = iter(range(1, 10**9))

    def call(self, name: str, args: dict) -> dict:
        """The tool's answer (its data), failing the test on an error."""
        id_ = next(self.ids)
        self.proc.stdin.write((tool_call(id_, name, args) + "\n").encode())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the server exited: {self.proc.stderr.read().decode()}"
        answer = json.loads(line)
        assert answer["id"] == id_
        assert answer["result"]["isError"] is False, answer
        return json.loads(answer["result"]["content"][0]["text"])["data"]

    def command(self, command: dict) -> dict:
        return self.call("strata_command", {"command": command})

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def two(tmp_path):
    db = tmp_path / "db"
    servers = [Server(db, tmp_path), Server(db, tmp_path)]
    yield db, servers
    for s in servers:
        if s.proc.poll() is None:
            s.proc.kill()
        s.proc.wait(timeout=60)


def value_of(got: dict) -> str | None:
    return base64.b64decode(got["value"]["value"]).decode() if got["found"] else None


@contextlib.contextmanager
def reopened(db: Path) -> Iterator[dict]:
    """The database reopened in this process: the SQLite check and the event chain pass; the head,
    the events and a way to run commands."""
    store = StrataStore.open(db)
    try:
        assert store.integrity_ok()
        server = StrataServer(Engine(store))
        run = command_runner(server)

        chain = run({"type": "event_verify_chain"})
        assert chain["valid"] is True, chain
        events = run({"type": "event_list", "limit": 100_000})["items"]
        assert [e["event"]["sequence"] for e in events] == list(range(len(events)))
        yield {"head": store.head, "events": events, "run": run}
    finally:
        store.close()


def test_a_second_server_starts_and_both_share_one_clock_and_each_others_writes(two):
    db, (a, b) = two
    versions = []

    def commit_version(data: dict) -> int:
        versions.append(data["commit"]["version"])
        return versions[-1]

    commit_version(a.call("strata_kv_put", {"key": "from-a", "value": "1"}))
    commit_version(b.call("strata_kv_put", {"key": "from-b", "value": "2"}))
    assert value_of(a.call("strata_kv_get", {"key": "from-b"})) == "2"
    assert value_of(b.call("strata_kv_get", {"key": "from-a"})) == "1"

    # A read each server remembers, then overwritten by the other: the next read is the new value.
    for round_ in range(5):
        writer, reader = (a, b) if round_ % 2 == 0 else (b, a)
        assert value_of(reader.call("strata_kv_get", {"key": "shared"})) == (None if round_ == 0 else f"r{round_ - 1}")
        commit_version(writer.call("strata_kv_put", {"key": "shared", "value": f"r{round_}"}))
        assert value_of(reader.call("strata_kv_get", {"key": "shared"})) == f"r{round_}"
        commit_version(reader.call("strata_event_append", {"event_type": "turn", "payload": {"round": round_}}))
        commit_version(writer.call("strata_event_append", {"event_type": "turn", "payload": {"round": round_}}))
        commit_version(writer.call("strata_json_set", {"key": "doc", "path": f"$.r{round_}", "value": round_}))
        got = reader.call("strata_json_get", {"key": "doc", "path": "$"})
        assert got["value"]["value"] == {f"r{i}": i for i in range(round_ + 1)}

    # Graphs, vectors (an index a reader has built and cached), branches and spaces.
    a.command({"type": "graph_create", "graph": "g"})
    b.command({"type": "graph_add_node", "graph": "g", "node_id": "x"})
    a.command({"type": "graph_add_node", "graph": "g", "node_id": "y"})
    commit_version(b.call("strata_graph_add_edge", {"graph": "g", "src": "x", "edge_type": "to", "dst": "y"}))
    page = a.command({"type": "graph_neighbors", "graph": "g", "node_id": "x", "direction": "outgoing"})
    assert [item["node_id"] for item in page["items"]] == ["y"]

    b.call("strata_vector_create_collection", {"collection": "v", "dimension": 2})
    commit_version(a.call("strata_vector_upsert", {"collection": "v", "key": "east", "vector": [1, 0]}))
    assert [m["key"] for m in b.call("strata_vector_query", {"collection": "v", "query": [0, 1], "k": 5})] == ["east"]
    commit_version(a.call("strata_vector_upsert", {"collection": "v", "key": "north", "vector": [0, 1]}))
    assert [m["key"] for m in b.call("strata_vector_query", {"collection": "v", "query": [0, 1], "k": 5})] == [
        "north", "east"]

    a.command({"type": "branch_create", "branch": "exp"})
    commit_version(b.call("strata_kv_put", {"key": "on-exp", "value": "e", "branch": "exp"}))
    assert value_of(a.call("strata_kv_get", {"key": "on-exp", "branch": "exp"})) == "e"
    assert value_of(a.call("strata_kv_get", {"key": "on-exp"})) is None
    b.command({"type": "space_create", "space": "notes"})
    assert "notes" in a.command({"type": "space_list"})["items"]
    commit_version(a.call("strata_kv_put", {"key": "in-notes", "value": "n", "space": "notes"}))
    assert value_of(b.call("strata_kv_get", {"key": "in-notes", "space": "notes"})) == "n"
    b.command({"type": "branch_delete", "branch": "exp"})
    assert [x["name"] for x in a.command({"type": "branch_list"})["items"]] == ["default"]

    assert versions == sorted(versions) and len(set(versions)) == len(versions), versions
    chain = b.command({"type": "event_verify_chain"})
    assert chain["valid"] is True and chain["length"] == 10
    a.close()
    b.close()
    with reopened(db) as after:
        assert after["head"] > versions[-1]
        assert [e["event"]["payload"]["round"] for e in after["events"]] == [r for r in range(5) for _ in (0, 1)]


def test_the_guide_tells_an_agent_a_second_server_is_served():
    # strata_guide is what an unsure agent reads first: it must not say a second
    # server on the same database is refused when the test above shows it is served.
    from memstrata.strata.guide import guide_markdown

    text = " ".join(guide_markdown().split())
    assert "refused" not in text.split("## Scope")[0]
    assert "Several servers may serve one durable database at once" in text
    assert "another server held the database for over 30 s" in text
    # ... nor that a tool naming no branch always uses `default` (the session branch does).
    assert "--branch NAME" in text and "(default `default`) and `space`" not in text


def test_concurrent_writers_of_one_key_and_one_log_lose_nothing(two):
    """Both commit every write, serialised: distinct versions, the later write wins, one gapless chain."""
    db, servers = two
    per_server = 150
    results: dict[int, list[dict]] = {}

    def hammer(index: int, server: Server) -> None:
        got = []
        for i in range(per_server):
            got.append(server.call("strata_kv_put", {"key": "same", "value": f"{index}:{i}"}))
            got.append(server.call("strata_event_append", {"event_type": "w", "payload": {"s": index, "i": i}}))
        results[index] = got

    for s in servers:  # both started and reading the database before either writes
        assert s.call("strata_kv_get", {"key": "same"})["found"] is False
    threads = [threading.Thread(target=hammer, args=(i, s)) for i, s in enumerate(servers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=200)
    assert sorted(results) == [0, 1]
    versions = [r["commit"]["version"] for got in results.values() for r in got]
    assert len(set(versions)) == len(versions) == 4 * per_server
    for got in results.values():  # each server's own commits climb
        own = [r["commit"]["version"] for r in got]
        assert own == sorted(own)
    kinds = sorted(r["effect"]["kind"] for got in results.values() for r in got if "key" in r)
    assert kinds == ["created"] + ["updated"] * (2 * per_server - 1)  # one of them made the key
    sequences = sorted(r["sequence"] for got in results.values() for r in got if "sequence" in r)
    assert sequences == list(range(2 * per_server))
    for s in servers:
        s.close()

    with reopened(db) as after:
        assert len(after["events"]) == 2 * per_server
        history = after["run"]({"type": "kv_history", "key": base64.b64encode(b"same").decode()})["items"]
    assert len(history) == 2 * per_server
    puts = [r["commit"]["version"] for got in results.values() for r in got if "key" in r]
    assert history[0]["version"] == max(puts)  # the newest write is the one a read answers


def test_sigkill_of_one_server_leaves_the_other_working_and_the_database_whole(two):
    db, (a, b) = two
    a.call("strata_vector_create_collection", {"collection": "v", "dimension": 2})
    acknowledged: list[tuple[str, int]] = []
    stop = threading.Event()

    def burst_a() -> None:
        # Writes until killed; only the answers it read count as acknowledged.
        try:
            i = 0
            while not stop.is_set():
                data = a.call("strata_kv_put", {"key": f"a{i}", "value": f"va{i}"})
                acknowledged.append((f"a{i}", data["commit"]["version"]))
                a.call("strata_event_append", {"event_type": "a", "payload": {"i": i}})
                i += 1
        except (AssertionError, OSError, ValueError):
            pass  # the pipe closed under it

    writer = threading.Thread(target=burst_a)
    writer.start()
    for i in range(40):
        b.call("strata_kv_put", {"key": f"b{i}", "value": f"vb{i}"})
        b.call("strata_event_append", {"event_type": "b", "payload": {"i": i}})
    while len(acknowledged) < 40:
        b.call("strata_kv_get", {"key": "a0"})
    os.kill(a.proc.pid, signal.SIGKILL)  # mid-burst, possibly holding the database for a command
    a.proc.wait(timeout=60)
    stop.set()
    writer.join(timeout=60)

    # The survivor goes on at once: it reads what the dead one acknowledged and commits above it.
    key, version = acknowledged[-1]
    assert value_of(b.call("strata_kv_get", {"key": key})) == "v" + key
    later = b.call("strata_kv_put", {"key": "after-kill", "value": "ok"})["commit"]["version"]
    assert later > version
    b.call("strata_vector_upsert", {"collection": "v", "key": "p", "vector": [1, 0]})
    assert b.command({"type": "event_verify_chain"})["valid"] is True
    b.close()

    with reopened(db) as after:
        run = after["run"]
        for key, _ in acknowledged:
            got = run({"type": "kv_get", "key": base64.b64encode(key.encode()).decode()})
            assert value_of(got) == "v" + key
        assert value_of(run({"type": "kv_get", "key": base64.b64encode(b"after-kill").decode()})) == "ok"
        assert len([e for e in after["events"] if e["event"]["event_type"] == "b"]) == 40
    # A new server starts on it (nothing stayed locked).
    c = Server(db, db.parent)
    try:
        assert value_of(c.call("strata_kv_get", {"key": "after-kill"})) == "ok"
    finally:
        c.close()


def test_two_stores_in_one_process_pick_up_each_others_commits(tmp_path):
    """The cache refresh alone (no second process): every remembered thing follows the other's commits."""
    db = tmp_path / "db"
    first, second = StrataStore.open(db), StrataStore.open(db)
    try:
        one, two = StrataServer(Engine(first)), StrataServer(Engine(second))

        def call(server, name, args):
            text, is_error = server.call_tool(name, args)
            assert not is_error, text
            return json.loads(text)["data"]

        call(one, "strata_kv_put", {"key": "k", "value": "1"})
        assert value_of(call(two, "strata_kv_get", {"key": "k"})) == "1"
        call(two, "strata_kv_put", {"key": "k", "value": "2"})
        assert value_of(call(one, "strata_kv_get", {"key": "k"})) == "2"
        call(one, "strata_command", {"command": {"type": "branch_create", "branch": "b"}})
        call(two, "strata_kv_put", {"key": "k", "value": "on b", "branch": "b"})
        assert value_of(call(one, "strata_kv_get", {"key": "k", "branch": "b"})) == "on b"
        assert second.head == first.head
        call(one, "strata_command", {"command": {"type": "json_create_index", "name": "n", "field_path": "$.n",
                                                 "index_type": "numeric"}})
        indexes = call(two, "strata_command", {"command": {"type": "json_list_indexes"}})["items"]
        assert [i["name"] for i in indexes] == ["n"]
    finally:
        first.close()
        second.close()


DIE_HOLDING = """
import os, signal, sys
from memstrata.strata.engine import Engine
from memstrata.strata.mcp import StrataServer
from memstrata.strata.store import StrataStore
store = StrataStore.open(sys.argv[1])
server = StrataServer(Engine(store))
store.hold()  # as a command does; the put below commits inside it
text, is_error = server.call_tool("strata_kv_put", {"key": "k", "value": "after"})
assert not is_error, text
os.kill(os.getpid(), signal.SIGKILL)  # dies before its command ends
"""


def test_a_commit_of_a_server_killed_before_its_command_ended_is_seen(tmp_path):
    db = tmp_path / "db"
    store = StrataStore.open(db)
    try:
        server = StrataServer(Engine(store))

        def kv_get() -> str | None:
            text, is_error = server.call_tool("strata_kv_get", {"key": "k"})
            assert not is_error, text
            return value_of(json.loads(text)["data"])

        server.call_tool("strata_kv_put", {"key": "k", "value": "before"})
        assert kv_get() == "before"  # remembered from here on
        child = subprocess.run([sys.executable, "-c", DIE_HOLDING, str(db)], capture_output=True, timeout=60,
                               env=strata_env(tmp_path, PYTHONPATH=CODE_ROOT))
        assert child.returncode == -signal.SIGKILL, child.stderr.decode()
        assert kv_get() == "after"
        text, _ = server.call_tool("strata_kv_put", {"key": "k", "value": "next"})
        assert json.loads(text)["data"]["effect"]["kind"] == "updated"
    finally:
        store.close()
