"""`memstrata serve`, `config` and `savings` as a user runs them: real subprocesses."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.stub_provider import ServerThread, StubUpstream
from memstrata.harness.proxy.providers import display_path
from memstrata.storage import Store, ledger

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "python_project"
SENTINEL = "sk-SENTINEL-cli-31d4"


def memstrata(*args, env, **kw):
    return subprocess.run([sys.executable, "-m", "memstrata", *args], env=env, capture_output=True, text=True,
                          timeout=120, **kw)


@pytest.fixture
def env(memstrata_home):
    return dict(os.environ, MEMSTRATA_HOME=str(memstrata_home), PYTHONUNBUFFERED="1")


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root)
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(project, env, port, *extra):
    proc = subprocess.Popen([sys.executable, "-m", "memstrata", "serve", "--project", str(project),
                             "--port", str(port), *extra], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited early: {proc.stderr.read()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("serve did not come up")


def test_serve_sigterm_keeps_ledger_and_port_taken(project, env):
    stub = StubUpstream()
    with ServerThread(stub.app) as up:
        port = free_port()
        proc = start_serve(project, env, port, "--openai-upstream", up.url + "/v1", "--compress", "aggressive",
                           "--min-tokens", "50")
        try:
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=SENTINEL, max_retries=0)
            code = (project / "app/auth/service.py").read_text() + "\n" + (project / "app/reports.py").read_text()
            for _ in range(3):
                client.chat.completions.create(model="gpt-4o", messages=[
                    {"role": "user", "content": f"```python\n{code}\n```\nWhat does AuthService.logout do?"}])
            # a second serve on the same port: clear message, distinct exit code
            second = memstrata("serve", "--project", str(project), "--port", str(port), env=env)
            assert second.returncode == 3
            assert f"port {port}" in second.stderr and "already in use" in second.stderr
            assert "Traceback" not in second.stderr
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped" in err and "Traceback" not in err
    assert SENTINEL not in out + err
    with Store(project / ".memstrata" / "index.db") as store:
        rows = ledger.entries(store)
        assert len(rows) == 3 and all(r.status == 200 for r in rows)
        assert ledger.latest_session(store)[2] is not None  # session closed by the shutdown
        assert store.integrity_ok()
    raw = b"".join(p.read_bytes() for p in (project / ".memstrata").iterdir() if p.is_file())
    assert SENTINEL.encode() not in raw
    # the ledger is readable afterwards from the CLI
    res = memstrata("savings", "--project", str(project), "--json", env=env)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["session_tokens_saved"] == 0  # no serve runs now: no session figures...
    assert summary["cycle_tokens_saved"] == sum(r.tokens_saved for r in rows) > 0  # ...the cycle has them
    text = memstrata("savings", str(project), env=env).stdout
    assert "memstrata serve: not running; last session" in text and "(stopped)" in text


def test_a_stop_says_the_ledger_is_lost_when_the_index_was_deleted_under_serve(project, env):
    # `rm -rf .memstrata` under a running serve: its rows went to a file nobody can read, so the
    # stop must not say "ledger saved".
    port = free_port()
    proc = start_serve(project, env, port, "--no-watch")
    try:
        shutil.rmtree(project / ".memstrata")
        deadline = time.monotonic() + 30
        while httpx.get(f"http://127.0.0.1:{port}/status", timeout=5).json()["status"] != "error":
            assert time.monotonic() < deadline, "status never said the index is gone"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "ledger saved" not in err
    assert "the ledger was not saved: the index file was deleted or replaced while serve ran" in err


@pytest.mark.parametrize("second_signal", [False, True])
def test_a_stop_gives_streams_their_grace_then_ends_them_with_an_error_event(project, env, second_signal):
    """Stopping serve lets an answer still streaming finish within --shutdown-grace; past it (or at
    a second signal) the stream ends with an error event the SDK raises, recorded as a shutdown,
    never as a client that left, and without a traceback."""
    import anthropic

    stub = StubUpstream(answer="word " * 200, chunks=200, slow_delay=0.1)  # a 20 s answer
    with ServerThread(stub.app) as up:
        port = free_port()
        proc = start_serve(project, env, port, "--anthropic-upstream", up.url, "--shutdown-grace",
                           "60" if second_signal else "1", "--no-watch")
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}/anthropic", api_key=SENTINEL, max_retries=0)
        got: list[str] = []
        with pytest.raises(anthropic.APIStatusError, match="memstrata serve is stopping"):
            with client.messages.stream(model="stub-slow", max_tokens=50,
                                        messages=[{"role": "user", "content": "hi"}]) as stream:
                for text in stream.text_stream:
                    got.append(text)
                    if len(got) == 3:
                        proc.send_signal(signal.SIGTERM)
                        if second_signal:
                            time.sleep(0.3)
                            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and SENTINEL not in out + err
    assert 3 <= len(got) < 200
    with Store(project / ".memstrata" / "index.db") as store:
        rows = ledger.entries(store)
        assert [(r.status, r.error) for r in rows] == [(200, "shutdown")]


def test_config_show_and_set(env, memstrata_home):
    res = memstrata("config", "show", env=env)
    assert res.returncode == 0 and "gpt-4o" in res.stdout
    assert (memstrata_home / "providers.json").is_file()  # defaults written on first run
    res = memstrata("config", "set", "provider-rate", "gpt-4o", "3.5", env=env)
    assert res.returncode == 0, res.stderr
    data = json.loads((memstrata_home / "providers.json").read_text())
    assert data["providers"]["openai"]["models"]["gpt-4o"]["input_cost_per_mtok"] == 3.5
    res = memstrata("config", "set", "provider-rate", "my-local-model", "0", "--provider", "ollama", env=env)
    assert res.returncode == 0
    res = memstrata("config", "set", "provider-rate", "claude-x", "2", "--output", "10", "--cache-read", "0.2",
                    env=env)
    assert res.returncode == 0 and "cache read $0.2, cache write $2.5" in res.stdout  # write derived: 1.25x
    entry = json.loads((memstrata_home / "providers.json").read_text())["providers"]["anthropic"]["models"]["claude-x"]
    assert entry == {"input_cost_per_mtok": 2.0, "output_cost_per_mtok": 10.0, "cache_read_cost_per_mtok": 0.2}
    assert "1-hour cache write $4" in res.stdout  # derived: Anthropic's 2x the input rate
    shown = memstrata("config", "show", env=env).stdout
    assert any(line.startswith("anthropic  claude-x") and line.endswith("*") for line in shown.splitlines())
    res = memstrata("config", "set", "provider-rate", "claude-x", "2", "--cache-write-1h", "4.5", env=env)
    assert res.returncode == 0 and "1-hour cache write $4.5" in res.stdout, res.stderr
    entry = json.loads((memstrata_home / "providers.json").read_text())["providers"]["anthropic"]["models"]["claude-x"]
    assert entry["cache_write_1h_cost_per_mtok"] == 4.5
    shown = memstrata("config", "show", env=env).stdout
    assert "1h write" in shown
    assert any(line.startswith("anthropic  claude-sonnet-4*") and line.rstrip().endswith("6.000")
               for line in shown.splitlines())
    for bad in ("-1", "1e308"):  # a sign typed wrong, a figure no provider charges
        res = memstrata("config", "set", "provider-rate", "gpt-4o", bad, env=env)
        assert res.returncode == 2 and "from 0 to 100,000" in res.stderr
    res = memstrata("config", "set", "provider-rate", "mystery", "1", env=env)
    assert res.returncode == 2 and "--provider" in res.stderr
    res = memstrata("config", "set", "billing-day", "15", env=env)
    assert res.returncode == 0
    assert json.loads(memstrata("config", "show", "--json", env=env).stdout)["billing_cycle_start_day"] == 15


def test_a_home_folder_that_cannot_take_the_providers_file(env, tmp_path):
    """MEMSTRATA_HOME naming a file (or a read-only or missing mount): reading the rates falls
    back to the shipped ones with a warning, a change says why it cannot be saved; no traceback."""
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    env = dict(env, MEMSTRATA_HOME=str(home))
    res = memstrata("config", "show", env=env)
    assert res.returncode == 0 and "gpt-4o" in res.stdout, res.stderr
    assert "is not a folder" in res.stderr and "Traceback" not in res.stderr
    for args in (("provider-rate", "gpt-4o", "3"), ("billing-day", "5")):
        res = memstrata("config", "set", *args, env=env)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr == (f"memstrata: cannot write {display_path(home / 'providers.json')}: "
                              f"{display_path(home)} is not a folder (MEMSTRATA_HOME chooses another folder)\n")


def test_a_provider_name_providers_json_does_not_list(env, project):
    """A typo in --openai-provider (``olama`` for ``ollama``) would have sent the requests to the
    default cloud endpoint: serve stops; with an upstream of its own only the rates are missing."""
    res = memstrata("serve", "--project", str(project), "--port", "0", "--openai-provider", "olama",
                    env=env)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("memstrata: --openai-provider olama: providers.json lists no provider of that "
                                 "name (it lists ")
    assert "give --openai-upstream URL" in res.stderr
    assert not (project / ".memstrata").exists()  # stopped before anything was started


def test_config_names_what_is_wrong_in_a_corrupt_providers_file(env, memstrata_home):
    """The decoder's message ends in a dangling "at" ("Invalid control character at"): the
    sentence was cut off there, with line and column before it."""
    memstrata_home.mkdir(parents=True)
    shown = display_path(memstrata_home / "providers.json")
    for text, reason in [('{"a": "x\ty"}', "invalid control character at line 1, column 9"),
                         ('{"a": "abc', "unterminated string starting at line 1, column 7"),
                         ('{"a": 1,\n}', "expecting property name enclosed in double quotes at line 2, column 1")]:
        (memstrata_home / "providers.json").write_text(text)
        res = memstrata("config", "show", env=env)
        assert res.returncode == 2
        assert res.stderr == f"memstrata: {shown} is not valid JSON: {reason}\n"


def test_savings_on_a_fresh_project(project, env):
    res = memstrata("savings", "--project", str(project), "--json", env=env)
    assert res.returncode == 0
    assert json.loads(res.stdout) == {
        "session_tokens_saved": 0, "session_dollar_saved": 0.0, "cycle_tokens_saved": 0,
        "cycle_dollar_saved": 0.0, "provider_rate_per_token": None, "recall": None, "precision": None}
    res = memstrata("savings", "--project", str(project), env=env)
    assert res.returncode == 0 and "not indexed yet (run memstrata index)" in res.stdout
    assert not (project / ".memstrata").exists()  # a read-only command created nothing
    # --all belongs to the --by tables; alone it changed nothing and read as an all-time total
    res = memstrata("savings", "--project", str(project), "--all", env=env)
    assert res.returncode == 2 and res.stderr == (
        "memstrata: --all widens a --by table to every recorded request: use it with --by\n")


@pytest.mark.parametrize("args,message", [
    (["--openai-upstream", "notaurl"], "--openai-upstream: must be an http:// or https:// URL"),
    (["--anthropic-upstream", "ftp://x/v1"], "--anthropic-upstream: must be an http:// or https:// URL"),
    (["--openai-upstream", "http://h:abc/v1"], "--openai-upstream: not a URL"),
    # Repeated without what may be a key: its user:password@ and query string.
    (["--openai-upstream", "http://u:sk-SENTINEL@h:abc/v1?key=sk-SENTINEL"],
     "--openai-upstream: not a URL: 'http://h:abc/v1'\n"),
    (["--read-timeout", "0"], "--read-timeout: must be a positive number"),
    (["--connect-timeout", "-1"], "--connect-timeout: must be a positive number"),
])
def test_an_upstream_serve_could_never_reach_is_refused_at_start(env, project, args, message):
    res = memstrata("serve", str(project), "--port", "0", *args, env=env)
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert "SENTINEL" not in res.stderr
