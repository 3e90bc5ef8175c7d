"""Shared pieces for the MCP server tests: a fixture project copy, the
``memstrata mcp`` command, and a ClientSession that asks for one protocol version."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "python_project"
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18")
TOOLS = ("context_query", "file_outline", "find_references", "find_symbol", "index_status", "savings_summary")
LOGIN_QUERY = "AuthService.login and its callers"


def memstrata_command() -> list[str]:
    script = Path(sys.executable).with_name("memstrata")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "memstrata"]


def child_env() -> dict[str, str]:
    """What a server subprocess needs from this environment (the SDK passes only a safe subset)."""
    return {k: os.environ[k] for k in ("MEMSTRATA_HOME", "PYTHONPATH") if k in os.environ}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    dest = tmp_path / "python_project"
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    return dest


async def open_session(session: ClientSession, version: str | None) -> types.InitializeResult:
    """Initialize, proposing ``version`` (the SDK's own initialize() always proposes its latest)."""
    if version is None:
        return await session.initialize()
    result = await session.send_request(
        types.InitializeRequest(params=types.InitializeRequestParams(
            protocol_version=version,
            capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name="memstrata-tests", version="0"),
        )),
        types.InitializeResult,
    )
    session.adopt(result)
    await session.send_notification(types.InitializedNotification())
    return result


@contextlib.asynccontextmanager
async def stdio_session(project: Path, errlog, version: str | None = None,
                        extra_args: tuple[str, ...] = ()) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    cmd = memstrata_command()
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", "--project", str(project), *extra_args],
                                   cwd=str(project), env=child_env())
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        init = await open_session(session, version)
        yield session, init


async def wait_until(check: Callable[[], "object"], timeout: float = 20.0, interval: float = 0.1):
    """Poll the async ``check`` until it returns something truthy (bounded, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            return value
        await anyio.sleep(interval)


async def wait_ready(session: ClientSession, timeout: float = 60.0) -> dict:
    async def ready():
        r = await session.call_tool("index_status", {})
        return r.structured_content if r.structured_content and r.structured_content["status"] == "ready" else None

    status = await wait_until(ready, timeout)
    assert status, "the index never became ready"
    return status


def text_of(result: types.CallToolResult) -> str:
    assert result.content and result.content[0].type == "text"
    return result.content[0].text
