"""Stormbuffer tests run the real ``sbuf`` and ``stormbuffer-mcp`` console scripts.

Every test gets its own HOME, XDG data and cache folders and a project folder
``work/demo-project`` (so its scope is ``project:demo-project``).  MCP
sessions are real subprocesses spoken to over stdio: raw JSON-RPC lines
(:class:`RawSession`) or the SDK's own client.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent
SBUF = str(BIN / "sbuf")
MCP = str(BIN / "stormbuffer-mcp")
WAIT = 30.0  # bounded waits against hangs, never asserted as a speed

SOURCE = {"kind": "conversation", "reference": "chat:2026-08-12", "actor": "user"}


class SbufEnv:
    def __init__(self, root: Path):
        self.root = root
        self.home = root / "home"
        self.data = root / "data"
        self.cache = root / "cache"
        self.project = root / "work" / "demo-project"
        for folder in (self.home, self.project):
            folder.mkdir(parents=True)
        self.env = {
            "PATH": os.environ.get("PATH", ""), "HOME": str(self.home), "XDG_DATA_HOME": str(self.data),
            "XDG_CACHE_HOME": str(self.cache), "LANG": "C.UTF-8", "TMPDIR": str(root / "tmp"),
        }
        (root / "tmp").mkdir()
        if "PYTHONPATH" in os.environ:
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]

    # -- paths -----------------------------------------------------------------------

    @property
    def store(self) -> Path:
        return self.project / ".sbuf"

    @property
    def records(self) -> Path:
        return self.store / "records"

    @property
    def global_store(self) -> Path:
        return self.data / "stormbuffer"

    def record_files(self, store: Path | None = None) -> list[Path]:
        return sorted(((store or self.store) / "records").rglob("*.md"))

    def record_file(self, record_id: str, store: Path | None = None) -> Path:
        return (store or self.store) / "records" / f"{record_id}.md"

    # -- processes -------------------------------------------------------------------

    def run(self, *args: str, input: bytes | str | None = None, cwd: Path | None = None,
            env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        data = input.encode() if isinstance(input, str) else input
        return subprocess.run([SBUF, *args], input=data if data is not None else b"", capture_output=True,
                              cwd=cwd or self.project, env=env or self.env, timeout=timeout)

    def ok(self, *args: str, **kw) -> str:
        proc = self.run(*args, **kw)
        assert proc.returncode == 0, f"sbuf {' '.join(args)} -> {proc.returncode}\n{proc.stdout!r}\n{proc.stderr!r}"
        return proc.stdout.decode()

    def fails(self, *args: str, **kw) -> str:
        proc = self.run(*args, **kw)
        assert proc.returncode == 1, f"sbuf {' '.join(args)} -> {proc.returncode}\n{proc.stdout!r}\n{proc.stderr!r}"
        err = proc.stderr.decode()
        assert err.startswith("error: ") and "Traceback" not in err, err
        return err

    def init(self, *flags: str) -> str:
        return self.ok("--project", "init", *flags)

    def invoke(self, operation: str, request: Any, *, project: bool = True,
               **kw) -> tuple[dict, subprocess.CompletedProcess]:
        """One ``sbuf invoke``; checks the transport contract (one line, empty stderr, exit code)."""
        data = request if isinstance(request, (bytes, str)) else json.dumps(request)
        proc = self.run(*(["--project"] if project else []), "invoke", operation, input=data, **kw)
        assert proc.stderr == b"", proc.stderr
        lines = proc.stdout.split(b"\n")
        assert len(lines) == 2 and lines[1] == b"", proc.stdout[:500]
        envelope = json.loads(lines[0])
        assert proc.returncode == (0 if envelope["ok"] else 1)
        assert envelope["version"] == 1 and envelope["operation"] == operation
        return envelope, proc

    def result(self, operation: str, request: dict, **kw) -> Any:
        envelope, _ = self.invoke(operation, {"version": 1, **request}, **kw)
        assert envelope["ok"], envelope
        return envelope["result"]

    def error(self, operation: str, request: Any, **kw) -> dict:
        envelope, _ = self.invoke(operation, request, **kw)
        assert not envelope["ok"], envelope
        assert set(envelope) == {"version", "operation", "ok", "error"}
        assert_clean(envelope["error"]["message"], self)
        return envelope["error"]

    # -- records ---------------------------------------------------------------------

    def remember(self, title: str = "Release constraint", body: str = "Releases ship on Tuesdays.\n",
                 kind: str = "decision", **extra) -> dict:
        return self.result("remember", {"title": title, "kind": kind, "body": body, "source": SOURCE, **extra})

    def active(self, title: str = "Release constraint", body: str = "Releases ship on Tuesdays.\n",
               **extra) -> str:
        """A record remembered and approved; returns its id."""
        proposal = self.remember(title, body, **extra)
        assert proposal["outcome"] == "requires_approval", proposal
        record_id = proposal["record_id"]
        assert self.ok("--project", "approve", record_id) == f"{record_id}\taccepted\tactive\n"
        return record_id

    def mcp(self, *flags: str, cwd: Path | None = None) -> "RawSession":
        return RawSession([MCP, "--stdio", *flags], cwd or self.project, self.env)


def assert_clean(text: str, env: SbufEnv) -> None:
    """No filesystem path and no traceback in text meant for a client."""
    assert "Traceback" not in text and "File \"" not in text, text
    for path in (env.root, env.project, env.home, env.data, env.cache):
        assert str(path) not in text, text
    assert "/tmp" not in text and ".sbuf" not in text, text


class RawSession:
    """stormbuffer-mcp driven with raw JSON-RPC lines."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]):
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.lines: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 1000

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def recv(self, timeout: float = WAIT) -> Any:
        line = self.lines.get(timeout=timeout)
        assert line is not None, "the server closed stdout"
        return json.loads(line)

    def request(self, method: str, params: dict | None = None) -> dict:
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        reply = self.recv()
        assert reply.get("id") == self._next_id, reply
        return reply

    def initialize(self, version: str = "2025-06-18") -> dict:
        reply = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                            "clientInfo": {"name": "tests", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply["result"]

    def call(self, tool: str, arguments: Any = None) -> dict:
        params = {"name": tool}
        if arguments is not None:
            params["arguments"] = arguments
        reply = self.request("tools/call", params)
        assert "result" in reply, reply
        return reply["result"]

    def envelope(self, tool: str, arguments: Any = None) -> dict:
        result = self.call(tool, arguments)
        assert len(result["content"]) == 1 and result["content"][0]["type"] == "text"
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        assert result["isError"] is (not result["structuredContent"]["ok"])
        assert _keys_sorted(result["structuredContent"]), "the real server writes every object's keys sorted"
        return result["structuredContent"]

    def read(self, uri: str) -> dict:
        return self.request("resources/read", {"uri": uri})

    def close(self) -> tuple[list[Any], bytes, int]:
        """Close stdin; (the replies still owed, stderr, exit code)."""
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        rest = []
        while True:
            line = self.lines.get(timeout=WAIT)
            if line is None:
                break
            rest.append(json.loads(line))
        code = self.proc.wait(timeout=WAIT)
        assert self.proc.stderr
        return rest, self.proc.stderr.read(), code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT)


@pytest.fixture
def sbuf(tmp_path) -> SbufEnv:
    return SbufEnv(tmp_path)


@pytest.fixture
def session(sbuf):
    """A raw MCP session factory; every session is ended at teardown."""
    opened: list[RawSession] = []

    def start(*flags: str, cwd: Path | None = None) -> RawSession:
        s = sbuf.mcp(*flags, cwd=cwd)
        opened.append(s)
        return s

    yield start
    for s in opened:
        s.kill()


def _keys_sorted(value: Any) -> bool:
    """True when every object in ``value``, as it came off the wire, has its keys in sorted order."""
    if isinstance(value, dict):
        return list(value) == sorted(value) and all(_keys_sorted(v) for v in value.values())
    if isinstance(value, list):
        return all(_keys_sorted(v) for v in value)
    return True
