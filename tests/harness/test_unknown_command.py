"""An unknown command gets a usage error that lists only the commands a user may run: the
internal ones (``kura daemon``, what ``kura`` starts in the background) stay out of it and
out of ``--help``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
# `kura daemon` is what `kura` starts in the background; `memstrata daemon` (status,
# stop) is a user's command since issue 24.
INTERNAL = {"kura": ("daemon",), "sbuf": ("daemon",), "strata": ("daemon",), "memstrata": ()}


def run(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    env = {"PATH": str(BIN), "HOME": str(tmp_path), "KURA_HOME": str(tmp_path / "kura"),
           "MEMSTRATA_HOME": str(tmp_path / "memstrata"), "XDG_DATA_HOME": str(tmp_path / "data")}
    if "PYTHONPATH" in os.environ:  # the tree under test, when it is not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, env=env, timeout=60,
                          stdin=subprocess.DEVNULL, cwd=tmp_path)


@pytest.mark.parametrize("cli", ["kura", "memstrata", "sbuf"])
def test_unknown_command_lists_only_public_commands(cli, tmp_path):
    res = run(tmp_path, cli, "bogus")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    listed = re.search(r"choose from (.*?)\)", res.stderr)
    assert listed, res.stderr
    choices = re.findall(r"'([^']+)'", listed.group(1))
    assert choices and not set(choices) & set(INTERNAL[cli]), choices


@pytest.mark.parametrize("cli", ["kura", "memstrata", "sbuf", "strata"])
def test_help_names_no_internal_command(cli, tmp_path):
    res = run(tmp_path, cli, "--help")
    assert res.returncode == 0, res.stderr
    # the first word of each line listing a command: `kura add ...` or an indented `  index  ...`
    commands = set(re.findall(rf"^(?:{cli} |\s{{2,6}})([a-z][a-z-]*)\b", res.stdout, re.M))
    assert commands and not commands & set(INTERNAL[cli]), commands
    assert "internal" not in res.stdout.lower()


def test_strata_unknown_command_is_a_usage_error(tmp_path):
    res = run(tmp_path, "strata", "./db", "bogus")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "unsupported command bogus" in res.stderr and "daemon" not in res.stderr


def test_memstrata_alone_lists_the_commands(tmp_path):
    """A first `memstrata` with no command: the list of commands (a usage error, exit 2), not only
    "the following arguments are required: COMMAND"."""
    for argv in (("memstrata",), ("memstrata", "-v")):
        res = run(tmp_path, *argv)
        assert res.returncode == 2 and res.stdout == "", res
        assert res.stderr.startswith("usage: memstrata ")
        assert all(f"\n    {c} " in res.stderr for c in ("index", "query", "mcp", "serve")), res.stderr
