"""Drive `memstrata mcp` with a third-party client: the MCP Inspector's CLI mode.

    python bench/mcp_inspector_check.py [--dir DIR] [--project PATH]

Installs @modelcontextprotocol/inspector with npm into DIR (default
~/.cache/memstrata/mcp-inspector, never inside the repository) unless it is
already there, then runs `tools/list` and two `tools/call`s against
`memstrata mcp` on a copy of fixtures/python_project (or on --project) and
prints each command with its output.  Exits non-zero if a check fails.
tests/mcp_server/test_mcp_inspector.py runs the same calls whenever such an
install exists (MEMSTRATA_INSPECTOR_DIR points the test at it).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DIR = Path(os.environ.get("MEMSTRATA_INSPECTOR_DIR", Path.home() / ".cache" / "memstrata" / "mcp-inspector"))
PACKAGE = "@modelcontextprotocol/inspector"


def memstrata_command() -> list[str]:
    script = Path(sys.executable).with_name("memstrata")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memstrata"]


def ensure_installed(directory: Path) -> None:
    if (directory / "node_modules" / ".bin" / "mcp-inspector").exists():
        return
    if shutil.which("npm") is None:
        sys.exit("npm is not installed: the MCP Inspector needs Node.js and npm")
    directory.mkdir(parents=True, exist_ok=True)
    print(f"$ npm install {PACKAGE}   (in {directory})", flush=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", PACKAGE], cwd=directory, check=True)


def inspector(directory: Path, project: Path, *method_args: str) -> tuple[list[str], subprocess.CompletedProcess]:
    cmd = ["npx", "--no-install", "mcp-inspector", "--cli", *memstrata_command(), "mcp", "--project", str(project),
           *method_args]
    done = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=180)
    return cmd, done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"where the Inspector is installed (default {DEFAULT_DIR})")
    ap.add_argument("--project", type=Path, default=None, help="project to serve (default: a copy of fixtures/python_project)")
    args = ap.parse_args()
    directory = args.dir.expanduser().resolve()
    if REPO in (directory, *directory.parents):
        sys.exit("install the Inspector outside the repository")
    ensure_installed(directory)
    version = json.loads((directory / "node_modules" / PACKAGE / "package.json").read_text())["version"]
    print(f"MCP Inspector {version} in {directory}\n")

    with tempfile.TemporaryDirectory() as tmp:
        project = args.project
        if project is None:
            project = Path(tmp) / "python_project"
            shutil.copytree(REPO / "fixtures" / "python_project", project)
        checks = [
            (("--method", "tools/list"), lambda out: sorted(t["name"] for t in out["tools"])
             == ["context_query", "index_status", "savings_summary"]),
            (("--method", "tools/call", "--tool-name", "context_query",
              "--tool-arg", "query=AuthService.login and its callers", "--tool-arg", "max_tokens=2048"),
             lambda out: not out.get("isError") and "def login" in out["structuredContent"]["context"]),
            (("--method", "tools/call", "--tool-name", "index_status"),
             lambda out: out["structuredContent"]["files_indexed"] > 0),
        ]
        failed = 0
        for method_args, check in checks:
            cmd, done = inspector(directory, project, *method_args)
            print("$ " + shlex.join(cmd))
            print(done.stdout.rstrip() or "(no stdout)")
            if done.stderr.strip():
                print("stderr:", done.stderr.rstrip())
            try:
                ok = done.returncode == 0 and check(json.loads(done.stdout))
            except (ValueError, KeyError, TypeError):
                ok = False
            print(f"-> {'ok' if ok else 'FAILED'}\n")
            failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
