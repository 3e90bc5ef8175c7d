"""Fixtures for the Strata-compatible server tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memstrata.strata.mcp import StrataServer
from memstrata.strata.engine import Engine
from memstrata.strata.store import StrataStore

STRATA = str(Path(sys.executable).parent / "strata")


@pytest.fixture
def server():
    """An in-process server on an in-memory database (the code path of the stdio server)."""
    store = StrataStore.memory()
    yield StrataServer(Engine(store))
    store.close()


def strata_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "STRATA_DB"}
    env.update(extra)
    return env


def run_lines(args: list[str], lines: list[bytes | str], env: dict | None = None, timeout: float = 60,
              cwd: str | None = None) -> subprocess.CompletedProcess:
    """Feed raw lines to ``strata ARGS`` over stdin and wait for it to exit at end of input."""
    data = b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines)
    return subprocess.run([STRATA, *args], input=data, capture_output=True, timeout=timeout, env=env, cwd=cwd)


def answers(proc: subprocess.CompletedProcess) -> list:
    """Every stdout line as JSON (the test fails on anything that is not protocol)."""
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def request(id_, method: str, params: dict | None = None) -> str:
    msg = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg)


def tool_call(id_, name: str, arguments: dict | None = None) -> str:
    params = {"name": name} if arguments is None else {"name": name, "arguments": arguments}
    return request(id_, "tools/call", params)


INITIALIZE = request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "tests", "version": "0"}})
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


def command_runner(server: StrataServer):
    """``run(command)``: one wire command through the strata_command tool, its ``data`` (the
    call must succeed)."""
    def run(command: dict) -> dict:
        text, is_error = server.call_tool("strata_command", {"command": command})
        assert not is_error, text
        return json.loads(text)["data"]

    return run
