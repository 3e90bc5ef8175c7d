"""``kura mcp`` spoken to in raw JSON-RPC lines: the same answers as
``memstrata mcp`` (one stdio front serves both), end of input included."""

from __future__ import annotations

import signal

import pytest

from tests.mcp_server.raw_jsonrpc import INIT, RawServer, call, check_malformed_session, check_stops_on_signal

from .conftest import KURA

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def server(kura, docs, tmp_path):
    kura.ok("add", "notes", str(docs))
    srv = RawServer([KURA, "mcp"], env=kura.env, stderr=tmp_path / "kura.stderr")
    yield srv
    srv.stop()
    assert "Traceback" not in (tmp_path / "kura.stderr").read_text()


def test_malformed_messages_are_answered_and_the_session_lives(server):
    check_malformed_session(server)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_while_stdin_stays_open(server, signum):
    check_stops_on_signal(server, signum, call(1, "search_rag", {"db": "notes", "q": "backoff"}))


def test_eof_right_after_calls_still_answers_them(server):
    server.send(INIT, *(call(i, "search_rag", {"db": "notes", "q": "backoff"}) for i in range(1, 6)))
    replies = server.close_and_collect()
    assert sorted(r["id"] for r in replies) == [0, 1, 2, 3, 4, 5]
    for r in replies[1:]:
        assert r["result"]["structuredContent"]["keyword"][0]["source"] == "notes.md"
    assert server.proc.returncode == 0


def test_missing_and_wrong_typed_arguments_get_kuras_sentence(server):
    server.send(INIT)
    server.replies_until(0)
    cases = {
        "a": ({}, "invalid argument: db is required; q is required"),
        "b": ({"db": "notes"}, "invalid argument: q is required"),
        "c": ({"db": 7, "q": "backoff"}, "invalid argument: db must be a string, got an integer"),
        "d": ({"db": "notes", "q": {"x": 1}}, "invalid argument: q must be a string, got an object"),
        "e": ({"db": None, "q": "backoff"}, "invalid argument: db must be a string, got null"),
        # Strings that look like JSON stay strings (the SDK decodes them for non-str arguments).
        "f": ({"db": "2024", "q": "[1]"}, 'invalid argument: "2024" not exist'),
    }
    server.send(*(call(ident, "search_rag", args) for ident, (args, _) in cases.items()))
    got = {}
    while len(got) < len(cases):
        r = server.reply()
        got[r["id"]] = r["result"]
    for ident, (_args, sentence) in cases.items():
        assert got[ident]["isError"] and got[ident]["content"][0]["text"] == sentence, (ident, got[ident])


def test_an_unknown_prompt_is_invalid_params_without_a_traceback(server):
    # The server advertises prompts (none): a name it lacks is the caller's mistake, -32602 as
    # MCP says, not error code 0 with a traceback on stderr (the fixture checks stderr).
    server.send(INIT, {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "summarise"}})
    reply = server.replies_until(1)[-1]
    assert reply["error"] == {"code": -32602, "message": "Unknown prompt: summarise"}


def test_requests_are_read_a_bounded_distance_ahead_of_their_answers(kura, tmp_path):
    """A client that sends without reading answers fills its pipes, not the server's
    memory: the stdio front stops reading at MAX_IN_FLIGHT unanswered requests."""
    import json
    import os
    import subprocess
    import time

    from memstrata.mcp_server.stdio import MAX_IN_FLIGHT

    proc = subprocess.Popen([KURA, "mcp"], env=kura.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "0"}}}
        head = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                *({"jsonrpc": "2.0", "id": n, "method": "tools/list"} for n in range(1, 200))]
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in head))  # answers nobody reads
        proc.stdin.flush()
        line = json.dumps({"jsonrpc": "2.0", "id": "p", "method": "ping", "params": {"pad": "x" * 16_000}}).encode()
        count = 1200                                           # ~19 MB offered
        bound = (MAX_IN_FLIGHT + 40) * (len(line) + 1) + 2 * 1024 * 1024   # plus buffers and pipes
        data = memoryview((line + b"\n") * count)
        fd = proc.stdin.fileno()
        os.set_blocking(fd, False)
        written, stalled_since = 0, None
        while written < len(data):
            try:
                written += os.write(fd, data[written:])
                stalled_since = None
            except BlockingIOError:  # stopped reading, or just slow: a bounded while to tell
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 3:
                    break
                time.sleep(0.01)
        assert written < bound < len(data), (written, bound)
    finally:
        proc.kill()
        proc.wait(timeout=60)
