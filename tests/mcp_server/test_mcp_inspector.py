"""A third-party client: the MCP Inspector's CLI mode drives `memstrata mcp`.

Runs only where the Inspector is already installed (tests never download):
`python bench/mcp_inspector_check.py` installs it outside the repository, in
~/.cache/memstrata/mcp-inspector, or wherever MEMSTRATA_INSPECTOR_DIR points.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .mcp_helpers import LOGIN_QUERY, TOOLS, memstrata_command

INSPECTOR_DIR = Path(os.environ.get("MEMSTRATA_INSPECTOR_DIR",
                                    Path.home() / ".cache" / "memstrata" / "mcp-inspector"))

pytestmark = pytest.mark.skipif(
    shutil.which("npx") is None or not (INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector").exists(),
    reason="MCP Inspector not installed (run bench/mcp_inspector_check.py once)",
)


def inspector(project: Path, *method_args: str) -> dict:
    done = subprocess.run(
        ["npx", "--no-install", "mcp-inspector", "--cli", *memstrata_command(), "mcp", "--project", str(project),
         *method_args],
        cwd=INSPECTOR_DIR, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_inspector_lists_and_calls_the_tools(project: Path):
    listed = inspector(project, "--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert tuple(sorted(tools)) == TOOLS
    assert tools["context_query"]["inputSchema"]["required"] == ["query"]

    out = inspector(project, "--method", "tools/call", "--tool-name", "context_query",
                    "--tool-arg", f"query={LOGIN_QUERY}", "--tool-arg", "max_tokens=2048")
    assert not out.get("isError")
    assert "def login" in out["structuredContent"]["context"]
    assert out["structuredContent"]["sources"][0] == "app/auth/service.py"
    assert json.loads(out["content"][0]["text"]) == out["structuredContent"]

    out = inspector(project, "--method", "tools/call", "--tool-name", "context_query",
                    "--tool-arg", "query=login", "--tool-arg", "max_tokens=-1")
    assert out["isError"] and "max_tokens must be at least 1" in out["content"][0]["text"]
