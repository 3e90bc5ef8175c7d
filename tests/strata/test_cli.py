"""Targeting and usage errors of the ``strata`` command."""

from __future__ import annotations

import json
import subprocess

import pytest

from ..conftest import terminal_output
from .conftest import STRATA, answers, run_lines, strata_env, tool_call

pytestmark = pytest.mark.timeout(120)

NO_DATABASE = ("error: [invalid_argument.cli.no_database]: no database specified\n"
               "  hint: pass a path (strata ./mydb kv put …), set STRATA_DB, or use --cache for ephemeral\n")


def _put_then_count(args, env, cwd=None):
    proc = run_lines(args, [tool_call(1, "strata_kv_put", {"key": "k", "value": "v"}),
                            tool_call(2, "strata_command", {"command": {"type": "kv_count"}})], env=env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    out = answers(proc)
    receipt = json.loads(out[0]["result"]["content"][0]["text"])["data"]["commit"]
    return receipt, json.loads(out[1]["result"]["content"][0]["text"])["data"]


def test_positional_path_db_flag_and_environment_open_the_same_database(tmp_path):
    env = strata_env(tmp_path)
    db = tmp_path / "my-db"
    receipt, count = _put_then_count([str(db), "mcp", "serve"], env)
    assert receipt["durability"] == "standard" and count == 1
    assert (db / "strata.db").is_file()
    assert _put_then_count(["--db", str(db), "mcp", "serve"], env)[1] == 1
    assert _put_then_count(["mcp", "serve"], strata_env(tmp_path, STRATA_DB=str(db)))[1] == 1
    # a relative path is relative to the working directory
    assert _put_then_count(["my-db", "mcp", "serve"], env, cwd=str(tmp_path))[1] == 1


def test_cache_is_in_memory_and_gone_at_exit(tmp_path):
    env = strata_env(tmp_path)
    receipt, count = _put_then_count(["--cache", "mcp", "serve"], env, cwd=str(tmp_path))
    assert receipt["durability"] == "not_durable" and count == 1
    assert _put_then_count(["--cache", "mcp", "serve"], env, cwd=str(tmp_path))[1] == 1  # a fresh one
    assert list(tmp_path.iterdir()) == []


def test_no_target_is_refused_with_the_documented_message(tmp_path):
    proc = subprocess.run([STRATA, "mcp", "serve"], capture_output=True, text=True, env=strata_env(tmp_path),
                          stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == NO_DATABASE
    assert proc.stdout == ""


@pytest.mark.parametrize("args", [["--db", "x", "--cache", "mcp", "serve"], ["x", "--cache", "mcp", "serve"]])
def test_a_path_with_cache_is_refused(tmp_path, args):
    proc = subprocess.run([STRATA, *args], capture_output=True, text=True, env=strata_env(tmp_path),
                          stdin=subprocess.DEVNULL, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: [invalid_argument.cli.conflicting_targets]: ")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args", [["db"], ["db", "kv", "put"], ["--db"], ["--bogus", "mcp", "serve"],
                                  ["db", "db2", "mcp", "serve"], ["--db", "a", "--db", "b", "mcp", "serve"],
                                  ["db", "--branch", "x", "--branch=y", "mcp", "serve"],
                                  ["db", "--branch", "", "mcp", "serve"]])
def test_usage_errors_exit_2(tmp_path, args):
    proc = subprocess.run([STRATA, *args], capture_output=True, text=True, env=strata_env(tmp_path),
                          stdin=subprocess.DEVNULL, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: [invalid_argument.cli.") and "Traceback" not in proc.stderr


def test_an_engine_command_on_the_command_line_points_to_its_tool(tmp_path):
    """The no-database hint suggests `strata ./mydb kv put ...`; this server says where that went."""
    proc = subprocess.run([STRATA, "db", "kv", "put", "greeting", "hello"], capture_output=True, text=True,
                          env=strata_env(tmp_path), stdin=subprocess.DEVNULL, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert "call the strata_kv_put tool" in proc.stderr and not (tmp_path / "db").exists()


def test_help_and_version(tmp_path):
    for flag in ("--help", "-h"):
        proc = subprocess.run([STRATA, flag], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "mcp serve" in proc.stdout and "STRATA_DB" in proc.stdout
    proc = subprocess.run([STRATA, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("strata (memstrata) ")


def test_a_folder_that_is_not_a_strata_database_is_refused(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    proc = run_lines([str(project), "mcp", "serve"], [], env=strata_env(tmp_path))
    assert proc.returncode == 1
    assert "not empty and holds no MemStrata Strata database" in proc.stderr.decode()
    assert str(tmp_path) not in proc.stderr.decode()
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt"]


def test_session_branch(tmp_path):
    db = tmp_path / "db"
    env = strata_env(tmp_path)
    run_lines([str(db), "mcp", "serve"], [tool_call(1, "strata_branch_fork", {"source": "default", "branch": "exp"})],
              env=env)
    proc = run_lines([str(db), "--branch", "exp", "mcp", "serve"],
                     [tool_call(1, "strata_kv_put", {"key": "k", "value": "on exp"})], env=env)
    assert answers(proc)[0]["result"]["isError"] is False
    proc = run_lines([str(db), "mcp", "serve"], [tool_call(1, "strata_kv_get", {"key": "k"}),
                                                 tool_call(2, "strata_kv_get", {"key": "k", "branch": "exp"})], env=env)
    found = [json.loads(a["result"]["content"][0]["text"])["data"]["found"] for a in answers(proc)]
    assert found == [False, True]
    proc = run_lines([str(db), "--branch", "ghost", "mcp", "serve"], [], env=env)
    assert proc.returncode == 2 and "branch `ghost` does not exist" in proc.stderr.decode()
    # A new database holds only the default branch: nothing is created for a session that cannot start.
    proc = run_lines([str(tmp_path / "new"), "--branch", "ghost", "mcp", "serve"], [], env=env)
    assert proc.returncode == 2 and "branch `ghost` does not exist" in proc.stderr.decode()
    assert not (tmp_path / "new").exists()


def test_a_read_only_database_folder_is_refused_with_a_clear_message(tmp_path):
    from tests.stormbuffer.helpers import read_only

    db = tmp_path / "db"
    env = strata_env(tmp_path)
    assert _put_then_count([str(db), "mcp", "serve"], env)[1] == 1
    (db / "strata.lock").unlink()  # as a copy of the folder that never held a server would be
    with read_only(db):
        proc = run_lines([str(db), "mcp", "serve"], [], env=env)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert err.startswith("error: [failed_precondition.cli.open]: cannot open database db for writing"), err
    assert "Traceback" not in err and str(tmp_path) not in err
    assert _put_then_count([str(db), "mcp", "serve"], env)[1] == 1  # nothing was lost


def test_an_empty_path_is_a_usage_error_and_dot_names_the_folder(tmp_path):
    env = strata_env(tmp_path)
    work = tmp_path / "my-work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    for args in (["", "mcp", "serve"], ["--db", "", "mcp", "serve"], ["--db=", "mcp", "serve"]):
        proc = run_lines(args, [], env=env, cwd=str(work))
        assert proc.returncode == 2, args
        assert proc.stderr.decode().startswith("error: [invalid_argument.cli.usage]: the database path is empty")
    proc = run_lines([".", "mcp", "serve"], [], env=env, cwd=str(work))
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith(
        "error: [failed_precondition.cli.open]: my-work is not empty and holds no MemStrata Strata database")
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt"]


def test_what_reaches_a_terminal_shows_control_characters_escaped(tmp_path):
    # A refusal repeats a branch name or path a person typed: an escape sequence in it must not
    # drive the terminal (stdout, the MCP channel, is left as it is).
    args = [str(tmp_path / "new"), "--branch", "evil\x1b]0;pwned\x07\x9b31m", "mcp", "serve"]
    code, out = terminal_output([STRATA, *args], strata_env(tmp_path), timeout=60)
    assert code == 2
    assert b"\x1b" not in out and b"\x07" not in out and "\x9b".encode() not in out, out
    assert b"evil\\x1b]0;pwned\\x07\\u009b31m" in out, out
