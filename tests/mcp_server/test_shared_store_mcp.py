"""``memstrata mcp --store URL --project-name NAME``: a real stdio MCP session
answering from a shared PostgreSQL index, with no checkout and across a
dropped connection."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from ..shared_store_helpers import dbname, pg_cli_env
from .mcp_helpers import (
    LOGIN_QUERY,
    child_env,
    memstrata_command,
    open_session,
    text_of,
)

NAME = "shared_python"
CALLS = (
    ("context_query", {"query": LOGIN_QUERY, "max_tokens": 2048}),
    ("context_query", {"query": "hash_password", "max_tokens": 512, "include_tests": True}),
    ("find_symbol", {"name": "AuthService.login", "include_body": True}),
    ("find_references", {"symbol": "AuthService.login"}),
    ("file_outline", {"path": "app/auth/service.py"}),
    ("index_status", {}),
)


@contextlib.asynccontextmanager
async def shared_session(url: str, cwd: Path, errlog) -> AsyncIterator[ClientSession]:
    cmd = memstrata_command()
    env = child_env()
    env.update({"PGPASSFILE": "/nonexistent/memstrata-tests-pgpass", "MEMSTRATA_DAEMON": "off"})
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", "--store", url, "--project-name", NAME],
                                   cwd=str(cwd), env=env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await open_session(session, None)
        yield session


async def answers(session: ClientSession) -> list[tuple[bool, str]]:
    out = []
    for tool, args in CALLS:
        r = await session.call_tool(tool, args)
        out.append((bool(r.is_error), text_of(r)))
    return out


def index_into(url: str, root: Path) -> None:
    env = pg_cli_env(dict(os.environ))
    proc = subprocess.run([*memstrata_command(), "index", str(root), "--store", url, "--project-name", NAME],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


def test_session_answers_the_same_after_the_checkout_is_deleted(project: Path, pg_url, tmp_path, errlog):
    index_into(pg_url, project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def run() -> list[tuple[bool, str]]:
        async with shared_session(pg_url, elsewhere, errlog) as s:
            return await answers(s)

    before = anyio.run(run)
    assert not any(err for err, _ in before), before
    assert "def login" in json.loads(before[0][1])["context"]
    status = json.loads(before[-1][1])
    assert (status["project"], status["status"], status["files_indexed"]) == (NAME, "ready", 10)

    shutil.rmtree(project)
    assert anyio.run(run) == before


def test_session_reconnects_after_its_connection_is_dropped(project: Path, pg_url, pg_cluster, tmp_path,
                                                            errlog):
    index_into(pg_url, project)

    async def run():
        async with shared_session(pg_url, tmp_path, errlog) as s:
            first = await answers(s)
            assert not any(err for err, _ in first), first
            # The server drops every client of the database (as a restart or a
            # pooler's idle timeout does); the session's next calls reconnect.
            assert pg_cluster.kill_backends(dbname(pg_url)) >= 1
            again = await answers(s)
            assert again == first
    anyio.run(run)
