"""Before ``initialize`` (spec 8.1; rmcp 2.1's serve_server): only ``ping`` is answered.
Any other message read first ends the handshake and the process: no answer, stdout
closes, ``stormbuffer-mcp: could not start the stdio adapter`` on stderr, exit 1, and
nothing the message asked for is done.  Lines that are no message at all are answered
and skipped, as after initialize."""

from __future__ import annotations

import json

import pytest

from .conftest import SOURCE

pytestmark = pytest.mark.timeout(120)

FAILED = b"stormbuffer-mcp: could not start the stdio adapter\n"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


def _line(message) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _ended(s) -> None:
    """The session ended without another answer: stdout closed, exit 1, the one message."""
    rest, stderr, code = s.close()
    assert rest == [] and code == 1 and stderr == FAILED, (rest, stderr, code)


@pytest.mark.parametrize("first", [
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
     "params": {"name": "memory_remember",
                "arguments": {"title": "T", "kind": "fact", "body": "b", "source": SOURCE}}},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 1, "method": "no/such"},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "result": {}},
])
def test_a_first_message_other_than_initialize_or_ping_ends_the_session(sbuf, session, first):
    sbuf.init()
    s = session("--project", "--allow-writes")
    # Sent while the process may still be starting, and followed by lines it never reads.
    s.send_raw(_line(first) + _line(INIT))
    _ended(s)
    assert sbuf.record_files() == []


def test_ping_and_malformed_lines_before_initialize_are_answered(sbuf, session):
    s = session()
    s.send_raw(b'{"jsonrpc":"2.0","id":"p","method":"ping"}\n')
    assert s.recv() == {"jsonrpc": "2.0", "id": "p", "result": {}}
    s.send_raw(b"not json\n")
    assert s.recv()["error"]["code"] == -32700
    s.send_raw(b"42\n")
    assert s.recv() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request"}}
    # rmcp reads no batches: before initialize one is an invalid request like any other non-message
    s.send_raw(b'[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]\n')
    assert s.recv()["error"] == {"code": -32600, "message": "Invalid request"}
    assert s.initialize()["serverInfo"]["name"] == "stormbuffer-mcp"
    assert len(s.request("tools/list")["result"]["tools"]) == 5
    rest, _, code = s.close()
    assert rest == [] and code == 0


def test_a_mangled_initialize_is_skipped_and_the_next_request_ends_the_session(sbuf, session):
    """Two byte order marks: rmcp strips one, cannot parse the rest and drops the line
    (this adapter answers it -32700); the session still waits for initialize."""
    s = session()
    s.send_raw(b"\xef\xbb\xbf\xef\xbb\xbf" + _line(INIT))
    assert s.recv()["error"]["code"] == -32700
    s.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
    _ended(s)


def test_stdin_closing_before_initialize_fails_the_handshake(sbuf, session):
    s = session()
    _ended(s)
