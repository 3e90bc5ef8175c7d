"""A project whose folder and ``.memstrata/`` are read-only (``chmod -R a-w``): the index
still answers every command that reads it, and what would write says so in one line.

Root ignores file modes, so the commands run without CAP_DAC_OVERRIDE (``honour_modes``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ..mcp_server.raw_jsonrpc import INIT, INITIALIZED, RawServer, call
from .serve_helpers import copy_project


def chmod_tree(root: Path, writable: bool) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath, name)
            mode = p.stat().st_mode
            p.chmod(mode | 0o200 if writable else mode & ~0o222)
    mode = root.stat().st_mode
    root.chmod(mode | 0o200 if writable else mode & ~0o222)


@pytest.fixture
def frozen(tmp_path, cli_env, memstrata_exe):
    """An indexed copy of the fixture project, then made read-only."""
    project = copy_project(tmp_path / "frozen")
    subprocess.run([memstrata_exe, "index", str(project)], env=cli_env, check=True, capture_output=True,
                   timeout=120)
    chmod_tree(project, writable=False)
    yield project
    chmod_tree(project, writable=True)


def run(exe, env, preexec, *args) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *args], env=env, preexec_fn=preexec, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def one_line(res: subprocess.CompletedProcess, *words: str) -> str:
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("memstrata:"), res.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_reads_answer_and_writes_refuse(frozen, cli_env, memstrata_exe, honour_modes):
    st = run(memstrata_exe, cli_env, honour_modes, "status", "--json", str(frozen))
    assert st.returncode == 0, st.stderr
    assert json.loads(st.stdout)["files_indexed"] == 10
    q = run(memstrata_exe, cli_env, honour_modes, "query", "AuthService.login", "--json", str(frozen))
    assert q.returncode == 0, q.stderr
    assert "app/auth/service.py" in json.loads(q.stdout)["sources"]
    idx = run(memstrata_exe, cli_env, honour_modes, "index", str(frozen))
    assert idx.returncode != 0
    one_line(idx, "read-only")
    assert not list((frozen / ".memstrata").glob("index.db-*"))  # nothing was left beside it


def test_mcp_serves_a_read_only_index(frozen, cli_env, memstrata_exe, honour_modes, tmp_path):
    stderr = tmp_path / "mcp.stderr"
    server = RawServer([memstrata_exe, "mcp", str(frozen)], env=cli_env, stderr=stderr, preexec_fn=honour_modes)
    try:
        server.send(INIT)
        assert "result" in server.replies_until(0)[-1]
        server.send(INITIALIZED, call(1, "context_query", {"query": "AuthService.login"}))
        answer = server.replies_until(1)[-1]["result"]
        assert not answer.get("isError"), answer
        assert "app/auth/service.py" in answer["structuredContent"]["sources"]
        # Asked after the answer: the query waited for the start-up load, a status call does not.
        server.send(call(2, "index_status", {}))
        status = server.replies_until(2)[-1]["result"]["structuredContent"]
        assert (status["status"], status["files_indexed"]) == ("ready", 10), status
        server.close_and_collect()
        assert server.proc.returncode == 0
    finally:
        server.stop()
    one_line(subprocess.CompletedProcess([], 0, "", stderr.read_text()), "read-only")


def test_mcp_without_an_index_is_one_clear_error(tmp_path, cli_env, memstrata_exe, honour_modes):
    project = copy_project(tmp_path / "bare")
    chmod_tree(project, writable=False)
    try:
        res = run(memstrata_exe, cli_env, honour_modes, "mcp", str(project))
        assert res.returncode == 2 and res.stdout == ""
        one_line(res, ".memstrata")
        res = run(memstrata_exe, cli_env, honour_modes, "status", str(project))
        assert res.returncode == 0 and "not indexed yet" in res.stdout, res.stdout + res.stderr
    finally:
        chmod_tree(project, writable=True)
    assert not (project / ".memstrata").exists()
