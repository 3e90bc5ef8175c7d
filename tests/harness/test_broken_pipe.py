"""``memstrata status | head -1`` and the like: when the reader of stdout goes away, every
console script ends quietly with the SIGPIPE exit status, never a BrokenPipeError traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .serve_helpers import copy_project

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    project = copy_project(tmp_path_factory.mktemp("pipe") / "proj")
    subprocess.run([str(BIN / "memstrata"), "index", str(project)], check=True, capture_output=True, timeout=120)
    return project


def closed_reader(cmd: list[str], env: dict) -> subprocess.Popen:
    """Run ``cmd`` with a stdout pipe whose reader is gone before anything is written."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    proc.stdout.close()
    return proc


@pytest.mark.parametrize("argv", [
    ["memstrata", "status", "{project}"],
    ["memstrata", "query", "AuthService.login", "{project}"],
    ["memstrata", "query", "AuthService.login", "--json", "{project}"],
    ["memstrata", "savings", "{project}"],
    ["kura", "--help"],
    ["kura", "list"],
    ["strata", "--help"],
], ids=lambda a: " ".join(a))
def test_closed_stdout_ends_quietly(argv, indexed, tmp_path, cli_env):
    cmd = [str(BIN / argv[0]), *(a.format(project=indexed) for a in argv[1:])]
    env = {**cli_env, "KURA_HOME": str(tmp_path / "kura")}
    env.pop("PYTHONUNBUFFERED", None)  # stdout buffered, as in a plain shell
    proc = closed_reader(cmd, env)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err.decode()
    assert err.decode() == ""
