"""One way to name the project on every command, helps that describe, and read-only
commands that create nothing (issue 14).  The real console script in subprocesses."""

import json
import subprocess
import sys
import time

import pytest

from memstrata.harness.cli.argtypes import project_of
from memstrata.harness.cli import build_parser, parse

from tests.conftest import MEMSTRATA, index_run_elsewhere

from .serve_helpers import copy_project

PROJECT_COMMANDS = {  # command -> (the arguments it needs besides the project, one of its options)
    "index": ([], ["--json"]), "watch": ([], ["--debounce", "1"]), "status": ([], ["--json"]),
    "query": (["login"], ["--json"]), "serve": ([], ["--no-watch"]), "mcp": ([], ["--no-watch"]),
    "savings": ([], ["--json"]),
}


@pytest.mark.parametrize("command", sorted(PROJECT_COMMANDS))
def test_every_command_takes_a_path_and_project_wins(command):
    parser = build_parser()
    extra, option = PROJECT_COMMANDS[command]
    assert project_of(parse(parser, [command, *extra, "some/dir"])) == "some/dir"
    assert project_of(parse(parser, [command, *extra, *option, "some/dir"])) == "some/dir"  # after an option too
    assert project_of(parse(parser, [command, *extra, "--project", "other"])) == "other"
    assert project_of(parse(parser, [command, *extra, "some/dir", "--project", "other"])) == "other"
    assert project_of(parse(parser, [command, *extra])) is None


def test_an_unquoted_question_is_told_to_go_in_quotes(capsys):
    """The shell splits ``memstrata query how does it work`` into words; argparse takes the first
    as the question and the second as the folder.  The error says how to ask it."""
    with pytest.raises(SystemExit) as exc:
        parse(build_parser(), ["query", "how", "does", "typer", "work", "--json"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert 'unrecognized arguments: typer work (a question of several words goes in quotes: ' \
           'memstrata query "how does typer work")' in err
    with pytest.raises(SystemExit):  # an unknown option alone gets no such hint
        parse(build_parser(), ["query", "login", "--bogus"])
    assert "quotes" not in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(PROJECT_COMMANDS) + ["config"])
def test_every_command_help_has_a_description(run_cli, command):
    out = run_cli(command, "--help").stdout
    usage, _, rest = out.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert description and not description.lstrip().startswith(("positional arguments", "options")), out


def test_status_help_describes_the_states(run_cli):
    out = run_cli("status", "--help").stdout
    assert "ready" in out and "stale" in out and "never indexed" in out


@pytest.mark.parametrize("args", [("status",), ("status", "--json"), ("query", "login"), ("query", "login", "--json"),
                                  ("savings",), ("savings", "--json"), ("savings", "--json", "--detail")])
def test_read_only_commands_create_nothing(run_cli, tmp_path, args):
    project = copy_project(tmp_path / "never_indexed")
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    res = run_cli(*args, str(project), check=False)
    assert "Traceback" not in res.stderr
    assert not (project / ".memstrata").exists()
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before
    if args[0] == "savings" and "--json" in args:
        data = json.loads(res.stdout)
        assert data.get("summary", data)["session_tokens_saved"] == 0
    else:
        assert "not indexed yet (run memstrata index)" in res.stdout + res.stderr
    if args[0] == "query":
        assert res.returncode == 2 and res.stderr.count("memstrata:") == 1
    else:
        assert res.returncode == 0


@pytest.mark.parametrize("args", [("status",), ("query", "login"), ("symbol", "login")])
@pytest.mark.parametrize("daemon", ["off", "on"])
def test_an_empty_index_file_is_no_index_and_stays_empty(run_cli, cli_env, tmp_path, args, daemon):
    """A ``touch``ed (or never written) index.db: SQLite would take it for a new database, and a
    read-only command would write the schema into it (or start a resident process for it)."""
    project = copy_project(tmp_path / "empty_index")
    (project / ".memstrata").mkdir()
    (project / ".memstrata" / "index.db").touch()
    res = run_cli(*args, str(project), check=False, env=dict(cli_env, MEMSTRATA_DAEMON=daemon))
    assert "not indexed yet (run memstrata index)" in res.stdout + res.stderr and "Traceback" not in res.stderr
    assert [p.name for p in (project / ".memstrata").iterdir()] == ["index.db"]
    assert (project / ".memstrata" / "index.db").stat().st_size == 0


def test_status_json_for_a_never_indexed_folder(run_cli, tmp_path):
    project = copy_project(tmp_path / "p")
    st = json.loads(run_cli("status", "--json", "--project", str(project)).stdout)
    assert st == {"project": str(project), "files_indexed": 0, "last_indexed": None, "index_size_mb": 0.0,
                  "status": "stale", "message": "not indexed yet (run memstrata index)"}


def test_both_forms_name_the_same_project_end_to_end(run_cli, tmp_path):
    a = copy_project(tmp_path / "a")
    b = copy_project(tmp_path / "b")
    run_cli("index", str(a))
    run_cli("index", "--project", str(b))
    assert json.loads(run_cli("status", str(a), "--json").stdout)["project"] == str(a)
    # --project wins over the positional folder
    assert json.loads(run_cli("status", str(a), "--project", str(b), "--json").stdout)["project"] == str(b)
    sl = json.loads(run_cli("query", "AuthService.login", str(b), "--json").stdout)
    assert "app/auth/service.py" in sl["sources"]
    assert json.loads(run_cli("savings", str(a), "--json").stdout)["cycle_tokens_saved"] == 0


def test_mcp_takes_the_positional_folder(tmp_path, cli_env, memstrata_exe):
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    project = copy_project(tmp_path / "m")

    async def probe():
        params = StdioServerParameters(command=memstrata_exe, args=["mcp", str(project), "--no-watch"], env=cli_env)
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("index_status", {})
            return res.structured_content

    st = anyio.run(probe)
    assert st["project"] == str(project)


def test_mcp_on_a_missing_folder_fails_before_loading_the_sdk(tmp_path, cli_env):
    # the error comes at once: neither the MCP SDK nor a counting child is started for it
    code = ("import sys; from memstrata.harness.cli import main; rc = main(['mcp', '--project', sys.argv[1]]); "
            "print(rc, 'mcp.server' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "missing")], capture_output=True, text=True,
                       env=cli_env, timeout=120)
    assert r.stdout.split() == ["2", "False"], r.stdout + r.stderr
    assert r.stderr.strip() == f"memstrata: project folder not found: {tmp_path / 'missing'}"


def test_broken_pipe_is_quiet_and_nonzero(tmp_path, cli_env, memstrata_exe):
    """``memstrata index --json | head``: the reader goes away before the summary is printed."""
    project = copy_project(tmp_path / "pipe")
    proc = subprocess.Popen([memstrata_exe, "index", "--json", str(project)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env)
    proc.stdout.close()  # like `head` exiting at once
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    assert proc.returncode == 141  # as for a tool ended by SIGPIPE
    assert err == "", err
    # the index itself was written before the summary: it is complete
    st = json.loads(subprocess.run([memstrata_exe, "status", "--json", str(project)], capture_output=True,
                                   text=True, env=cli_env, timeout=60).stdout)
    assert (st["status"], st["files_indexed"]) == ("ready", 10)


def test_version_flag():
    out = subprocess.run([sys.executable, "-m", "memstrata", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("memstrata ")


@pytest.mark.parametrize("command", ["index", "watch", "serve", "mcp"])
def test_the_home_folder_is_never_indexed_by_default(run_cli, cli_env, tmp_path, command):
    """An MCP host that starts `memstrata mcp` without --project in the home folder (or in /)
    must not get everything below it indexed: refused, nothing created; named, it is honoured."""
    home = copy_project(tmp_path / "home")
    env = dict(cli_env, HOME=str(home))
    args = [command, "--port", "0"] if command == "serve" else [command]
    res = run_cli(*args, check=False, cwd=str(home), env=env, input="", timeout=60)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr == ("memstrata: the current directory is your home folder, not a project: run this in "
                          "the project folder or name it (--project /path/to/project)\n")
    assert not (home / ".memstrata").exists()
    if command == "index":
        run_cli("index", str(home), cwd=str(home), env=env)   # named explicitly: indexed
        run_cli("index", cwd=str(home), env=env)              # and from then on it is a project
        assert (home / ".memstrata" / "index.db").is_file()


def test_an_index_of_the_home_folder_does_not_claim_the_projects_below_it(run_cli, cli_env, tmp_path):
    """Once the home folder was indexed (named explicitly), a project below it still gets its own
    index, and an unindexed one is reported as such, instead of every command below the home
    folder re-indexing or answering from the home folder's index."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.py").write_text("def home_helper():\n    return 1\n")
    env = dict(cli_env, HOME=str(home))
    run_cli("index", str(home), cwd=str(home), env=env)
    project = copy_project(home / "src" / "shop")
    res = run_cli("status", "--json", cwd=str(project), env=env, check=False)
    assert "not indexed yet" in res.stdout + res.stderr, (res.stdout, res.stderr)
    res = run_cli("index", "--json", cwd=str(project), env=env)
    assert json.loads(res.stdout)["project"] == str(project.resolve())
    assert (project / ".memstrata" / "index.db").is_file()
    # A folder inside the project still means the project.
    sub = next(p for p in project.iterdir() if p.is_dir() and p.name != ".memstrata")
    st = json.loads(run_cli("status", "--json", cwd=str(sub), env=env).stdout)
    assert st["project"] == str(project.resolve())
    # The home folder itself is still its own project.
    st = json.loads(run_cli("status", "--json", cwd=str(home), env=env).stdout)
    assert st["project"] == str(home.resolve())


def test_status_names_the_files_with_syntax_errors(run_cli, tmp_path):
    project = copy_project(tmp_path / "p")
    (project / "app" / "broken.py").write_text("def ok():\n    return 1\n\ndef broken(:\n    pass\n")
    run_cli("index", str(project))
    out = run_cli("status", str(project)).stdout
    assert "1 with syntax errors" in out
    # A run that parses nothing reports the index's files with syntax errors, as status does.
    again = run_cli("index", str(project)).stdout
    assert "0 parsed" in again and "1 with syntax errors" in again
    [line] = [ln for ln in out.splitlines() if ln.startswith("syntax errors:")]
    assert line.startswith("syntax errors: app/broken.py (") and "line 4" in line


def test_status_skipped_lists_what_the_index_left_out(run_cli, tmp_path):
    project = copy_project(tmp_path / "p")
    (project / "app" / "blob.bin").write_bytes(bytes(range(256)) * 8)
    (project / "app" / "big.py").write_text("x = 1\n" * 400_000)
    run_cli("index", str(project))
    res = run_cli("status", "--skipped", str(project))
    out = res.stdout.splitlines()
    assert "app/big.py  too_large  (2,400,000 bytes)" in out
    assert any(line.startswith("app/blob.bin  ") for line in out)
    folders = sum(1 for line in out if line.split("  ")[0].endswith("/"))
    assert folders >= 1  # .memstrata/ at least: folders are counted as folders, not files
    assert res.stderr.splitlines()[-1] == f"-- {len(out) - folders} files and {folders} folder" \
        f"{'s' if folders != 1 else ''} left out"
    rows = json.loads(run_cli("status", str(project), "--skipped", "--json").stdout)
    assert {"path": "app/big.py", "reason": "too_large", "size": 2_400_000} in rows


def test_status_syntax_errors_lists_every_broken_file(run_cli, tmp_path):
    project = copy_project(tmp_path / "p")
    for i in range(7):  # more than the plain status names
        (project / "app" / f"broken{i}.py").write_text("def ok():\n    return 1\n\ndef bad(:\n    pass\n")
    run_cli("index", str(copy_project(tmp_path / "clean")))
    clean = run_cli("status", "--syntax-errors", str(tmp_path / "clean"))
    run_cli("index", str(project))
    res = run_cli("status", "--syntax-errors", str(project))
    out = res.stdout.splitlines()
    assert [line.split("  ")[0] for line in out] == [f"app/broken{i}.py" for i in range(7)]
    assert res.stderr.splitlines()[-1] == "-- 7 files indexed with syntax errors"
    assert all("line 4" in line for line in out)
    rows = json.loads(run_cli("status", str(project), "--syntax-errors", "--json").stdout)
    assert [r["path"] for r in rows] == [f"app/broken{i}.py" for i in range(7)] and "line 4" in rows[0]["error"]
    # None: an empty list on stdout, and a count that says so.
    assert clean.stdout == "" and clean.stderr.splitlines()[-1] == "-- 0 files indexed with syntax errors"


def test_index_of_a_folder_inside_an_indexed_project_says_which_project(run_cli, tmp_path):
    project = copy_project(tmp_path / "p")
    run_cli("index", str(project))
    sub = next(p for p in project.iterdir() if p.is_dir() and not p.name.startswith("."))
    res = run_cli("index", str(sub))
    assert f"project: {project} (the indexed project holding {sub})" in res.stderr
    assert not (sub / ".memstrata").exists()


def test_index_run_from_a_folder_inside_an_indexed_project_says_which_project(run_cli, tmp_path):
    # Standing in a sub-folder (no folder named) is the everyday case of the same rule.
    project = copy_project(tmp_path / "p")
    run_cli("index", str(project))
    sub = next(p for p in project.iterdir() if p.is_dir() and not p.name.startswith("."))
    res = run_cli("index", cwd=str(sub))
    assert f"project: {project} (the indexed project holding {sub})" in res.stderr
    assert not (sub / ".memstrata").exists()
    # At the project's own root nothing extra is said.
    assert "project:" not in run_cli("index", cwd=str(project)).stderr


def test_query_json_keeps_stdout_the_answer_and_says_its_notes_on_stderr(run_cli, tmp_path):
    project = copy_project(tmp_path / "p")
    run_cli("index", str(project))
    service = project / "app" / "auth" / "service.py"
    service.write_text(service.read_text() + "\n\ndef added_later():\n    return 1\n")
    res = run_cli("query", "AuthService.login", str(project), "--json")
    assert set(json.loads(res.stdout)) == {"context", "tokens", "baseline_tokens", "sources"}
    assert "note: app/auth/service.py changed on disk since indexed" in res.stderr


def test_a_question_during_the_first_index_run_says_it_is_under_way(run_cli, tmp_path):
    project = copy_project(tmp_path / "p")
    with index_run_elsewhere(project):
        for args in (("query", "login"), ("symbol", "login")):
            res = run_cli(*args, str(project), check=False)
            assert res.returncode == 2 and "the first index run is still under way in another process" in res.stderr



def test_query_dash_reads_the_question_from_standard_input(run_cli, cli_env, memstrata_exe, tmp_path):
    """A question too long for a command line (a stack trace, an issue's text) comes on stdin:
    the same slice as the question given as an argument."""
    project = copy_project(tmp_path / "p")
    run_cli("index", str(project))
    question = "AuthService.login and its callers"
    direct = run_cli("query", question, str(project), "--json")
    piped = run_cli("query", "-", str(project), "--json", input=question + "\n")
    assert json.loads(piped.stdout) == json.loads(direct.stdout)
    assert "def login" in json.loads(piped.stdout)["context"]
    not_text = subprocess.run([memstrata_exe, "query", "-", str(project)], input=b"\xff\xfelogin",
                              capture_output=True, env=cli_env, timeout=120)
    assert not_text.returncode == 2
    assert "standard input is not UTF-8 text (byte 0)" in not_text.stderr.decode()


def test_files_named_like_standard_modules_never_run_in_the_index_workers(cli_env, tmp_path):
    """`memstrata mcp` started in the project folder (as MCP hosts do) indexes with worker processes
    that start in that folder: the project's own `struct.py` or `selectors.py` must not stand in for
    the standard library's there (they ran, and the index failed)."""
    project, marker = tmp_path / "p", tmp_path / "ran"
    project.mkdir()
    for i in range(80):  # enough files for parse workers
        (project / f"mod{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    for name in ("struct", "selectors", "socket"):
        (project / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n"
                                            "raise ImportError('a project file, not the standard library')\n")
    proc = subprocess.Popen([MEMSTRATA, "mcp"], cwd=project, env=cli_env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def ask(i, method, params):
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
            proc.stdin.flush()
            return json.loads(proc.stdout.readline())

        ask(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}})
        deadline = time.monotonic() + 90
        while True:
            res = ask(1, "tools/call", {"name": "index_status", "arguments": {}})
            st = json.loads(res["result"]["content"][0]["text"])
            if st["status"] in ("ready", "error") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (st["status"], st["files_indexed"]) == ("ready", 83), st
        assert not marker.exists(), marker.read_text()
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_index_summary_counts_one_file_in_the_singular(run_cli, tmp_path):
    project = tmp_path / "one"
    project.mkdir()
    (project / "only.py").write_text("def only():\n    return 1\n")
    out = run_cli("index", str(project)).stdout
    assert out.startswith("indexed 1 file in "), out


@pytest.mark.parametrize("args", [["status", "{long}"], ["config", "{long}"], ["{long}"],
                                  ["query", "--max-tokens", "{long}", "hi", "--project", "{tmp}"],
                                  ["symbol", "hello", "--kind", "{long}", "--project", "{tmp}"]])
def test_errors_repeat_at_most_two_hundred_characters_of_an_argument(args, tmp_path, capsys, monkeypatch):
    # argparse's refusals and MemStrata's own: a 100 KB argument is named by its start and length.
    from memstrata.harness.cli import main
    # main() sets PYTHONSAFEPATH for the interpreters it starts; in this process it must not outlive
    # the test (a later `python -m tests.<module>` would no longer find the tests package).
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    (tmp_path / "a.py").write_text("def hello():\n    return 1\n")
    long = "x" * 100_000
    argv = [a.format(long=long, tmp=tmp_path) for a in args]
    if "{tmp}" in args:
        assert main(["index", str(tmp_path)]) == 0
        capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "x" * 200 in err and "x" * 201 not in err and "(100,000 characters)" in err, err[:400]
