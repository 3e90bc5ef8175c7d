"""Raw JSON-RPC lines to an MCP server subprocess, and the replies read back.

Shared by the stdio tests of every server built on ``mcp_server.stdio``
(``memstrata mcp``, ``kura mcp``): the same malformed lines, the same
expected answers.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

# (line sent, the (id, code) answers JSON-RPC 2.0 requires for it)
MALFORMED: list[tuple[bytes, list[tuple[Any, int]]]] = [
    (b"this is not json {", [(None, -32700)]),
    (b'{"jsonrpc": "2.0", "id": 2, "method": "tools/ca', [(None, -32700)]),
    (b'\xff\xfe{"jsonrpc": "2.0", "id": "latin", "method": "ping"}', [(None, -32700)]),
    (b'{"jsonrpc": "2.0", "id": "nan", "method": "ping", "params": {"x": NaN}}', [(None, -32700)]),
    (b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}', [(None, -32700)]),
    # valid JSON with a lone surrogate in its params: refused under its own (clean) id
    (b'{"jsonrpc": "2.0", "id": "s", "method": "ping", "params": {"x": "\\udc00"}}', [("s", -32600)]),
    (b"[]", [(None, -32600)]),
    (b"42", [(None, -32600)]),
    (b'"ping"', [(None, -32600)]),
    (b'{"id": "no-version", "method": "ping"}', [("no-version", -32600)]),
    (b'{"jsonrpc": "1.0", "id": "old-version", "method": "ping"}', [("old-version", -32600)]),
    (b'{"method": "notifications/initialized"}', [(None, -32600)]),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', [(None, -32600)]),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}', [(None, -32600)]),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', [(None, -32600)]),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', [(None, -32600)]),
    (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', [(None, -32600)]),
    (b'{"jsonrpc": "2.0", "id": "num-method", "method": 5}', [("num-method", -32600)]),
    (b'{"jsonrpc": "2.0", "id": "no-method"}', [("no-method", -32600)]),
    (b'{"jsonrpc": "2.0", "id": "list-params", "method": "tools/list", "params": [1]}', [("list-params", -32602)]),
    (b'{"jsonrpc": "2.0", "id": "str-params", "method": "tools/list", "params": "x"}', [("str-params", -32600)]),
    (b'{"jsonrpc": "2.0", "id": "unknown", "method": "no/such/method"}', [("unknown", -32601)]),
    (b'{"jsonrpc": "2.0", "id": "bad-call", "method": "tools/call", "params": {"arguments": {}}}',
     [("bad-call", -32602)]),
    (b'{"jsonrpc": "2.0", "id": "str-args", "method": "tools/call", "params": {"name": "x", "arguments": "q"}}',
     [("str-args", -32602)]),
    (b'{"jsonrpc": "2.0", "id": "num-name", "method": "tools/call", "params": {"name": 5}}', [("num-name", -32602)]),
    # a notification is never answered, not even when its params are wrong (JSON-RPC 2.0 section 4.1)
    (b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": [1]}', []),
    (b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "x"}', []),
    (b"   ", []),  # a blank line is not a message
]
# A batch: one answer per element that expects one, as one array.
BATCH = (b'[{"jsonrpc": "2.0", "id": "b1", "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"}, 7]',
         [("b1", -32600), (None, -32600)])


def line(message: dict | bytes | str) -> bytes:
    if isinstance(message, bytes):
        return message + b"\n"
    return (message if isinstance(message, str) else json.dumps(message)).encode() + b"\n"


def call(ident: Any, tool: str, arguments: dict) -> dict:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


class RawServer:
    """A server subprocess spoken to in raw lines; stdout is read on a thread."""

    def __init__(self, cmd: list[str], *, env: dict | None = None, cwd: str | None = None, stderr: Path,
                 preexec_fn=None):
        self._stderr = open(stderr, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=env, cwd=cwd, preexec_fn=preexec_fn)
        self.raw_lines: list[bytes] = []
        self._replies: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.raw_lines.append(raw)
            self._replies.put(json.loads(raw))
        self._replies.put(None)  # EOF

    def send(self, *messages: dict | bytes | str) -> None:
        self.proc.stdin.write(b"".join(line(m) for m in messages))
        self.proc.stdin.flush()

    def reply(self, timeout: float = 60.0) -> Any:
        """The next reply (a dict, or a list for a batch); None at EOF."""
        try:
            return self._replies.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply within {timeout:.0f}s (replies so far: {len(self.raw_lines)})") from None

    def replies_until(self, ident: Any, timeout: float = 60.0) -> list[Any]:
        """Every reply up to and including the one with ``ident``."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            r = self.reply(max(0.1, deadline - time.monotonic()))
            assert r is not None, f"stdout closed before the reply to {ident!r}; got {out}"
            out.append(r)
            if isinstance(r, dict) and r.get("id") == ident and ("result" in r or "error" in r):
                return out

    def close_and_collect(self, timeout: float = 120.0) -> list[Any]:
        """Close stdin (EOF), then every reply until the server exits."""
        self.proc.stdin.close()
        out = []
        deadline = time.monotonic() + timeout
        while (r := self.reply(max(0.1, deadline - time.monotonic()))) is not None:
            out.append(r)
        self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._stderr.close()


def answers(replies: list[Any]) -> list[tuple[Any, int]]:
    """(id, error code) of each error reply, batches flattened; sorted for comparison."""
    flat = [r for reply in replies for r in (reply if isinstance(reply, list) else [reply])]
    return sorted(((r.get("id"), r["error"]["code"]) for r in flat if "error" in r), key=repr)


def expected_answers(cases) -> list[tuple[Any, int]]:
    return sorted((pair for _, pairs in cases for pair in pairs), key=repr)


def check_malformed_session(server: RawServer) -> None:
    """Initialize, send every malformed line and a batch, then check each answer and that the session lives."""
    server.send(INIT)
    init = server.replies_until(0)[-1]
    assert "result" in init, init
    server.send(INITIALIZED)
    server.send(*(raw for raw, _ in MALFORMED), BATCH[0], {"jsonrpc": "2.0", "id": "alive", "method": "ping"})
    replies = server.replies_until("alive")
    # The front answers at once, the SDK from its own tasks: wait for the stragglers.
    want = expected_answers([*MALFORMED, BATCH])
    deadline = time.monotonic() + 30
    while len(answers(replies)) < len(want) and time.monotonic() < deadline:
        replies.append(server.reply(timeout=max(0.1, deadline - time.monotonic())))
    assert answers(replies) == want
    batch = [r for r in replies if isinstance(r, list)]
    assert len(batch) == 1 and sorted((e["id"] for e in batch[0]), key=repr) == sorted(["b1", None], key=repr)
    alive = next(r for r in replies if isinstance(r, dict) and r.get("id") == "alive")
    assert alive["result"] == {}
    for reply in replies:
        for r in reply if isinstance(reply, list) else [reply]:
            assert r["jsonrpc"] == "2.0"
            if "error" in r:
                assert "pydantic" not in r["error"]["message"] and "Traceback" not in r["error"]["message"]
    assert all(raw.endswith(b"\n") and raw.count(b"\n") == 1 for raw in server.raw_lines)


def check_stops_on_signal(server: RawServer, signum: int, request: dict) -> None:
    """A client stops the server it launched with SIGTERM (or Ctrl-C, SIGINT) while keeping its
    stdin open: the server exits (0 for SIGTERM, 130 for SIGINT) rather than wait for end of input.
    The 60 s bound is a hang guard, not a speed figure."""
    import signal as signals

    server.send(INIT)
    server.replies_until(0)
    server.send(INITIALIZED, request)
    server.replies_until(request["id"])
    server.proc.send_signal(signum)
    assert server.proc.wait(timeout=60) == (0 if signum == signals.SIGTERM else 130)
