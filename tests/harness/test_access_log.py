"""``memstrata serve --access-log``: one line per request, never a header or a key."""

import re

import httpx
import openai
import pytest

from tests.stub_provider import ServerThread, StubUpstream

from .serve_helpers import Serve, cli_env, copy_project

SENTINEL = "sk-SENTINEL-access-log-5a1e"
LINE = re.compile(r"^memstrata: (GET|POST) (\S+) (\d{3}|-) (\d+\.\d) ms(?: tokens (\d+) -> (\d+) \(saved (-?\d+)\))?$")


@pytest.fixture(scope="module")
def upstream():
    stub = StubUpstream(record=False)
    with ServerThread(stub.app) as server:
        yield server.url


def access_lines(serve: Serve) -> list[re.Match]:
    return [m for m in map(LINE.match, serve.lines) if m]


def after_probes(serve: Serve) -> list[re.Match]:
    """The lines from the first model call on: the helper's readiness probes come before it
    (a probe that timed out on a loaded machine is still answered, and logged, later)."""
    lines = access_lines(serve)
    first = next((i for i, m in enumerate(lines) if m[1] == "POST"), len(lines))
    return lines[first:]


def test_one_line_per_request_with_tokens_when_compressed(tmp_path, memstrata_home, upstream, wait_until):
    project = copy_project(tmp_path / "proj")
    env = cli_env(memstrata_home)
    with Serve(project, env, "--openai-upstream", upstream + "/v1", "--compress", "aggressive", "--min-tokens", "50", "--no-watch",
               "--access-log") as serve:
        client = openai.OpenAI(base_url=serve.url + "/v1", api_key=SENTINEL, max_retries=0)
        code = (project / "app/auth/service.py").read_text() + "\n" + (project / "app/reports.py").read_text()
        client.chat.completions.create(model="gpt-4o", messages=[
            {"role": "user", "content": f"```python\n{code}\n```\nWhat does AuthService.logout do?"}])
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hello"}])
        httpx.get(serve.url + "/health?api_key=" + SENTINEL, headers={"x-api-key": SENTINEL})
        httpx.get(serve.url + "/nowhere")
        httpx.get(serve.url + "/status", headers={"host": "evil.example"})
        wait_until(lambda: len(after_probes(serve)) >= 5, message="five access-log lines")
    lines = after_probes(serve)  # serve has stopped: nothing more can arrive
    requests = [(m[1], m[2], m[3]) for m in lines]
    assert requests == [("POST", "/v1/chat/completions", "200"), ("POST", "/v1/chat/completions", "200"),
                        ("GET", "/health", "200"), ("GET", "/nowhere", "404"), ("GET", "/status", "421")]
    compressed, plain = lines[:2]
    before, after, saved = int(compressed[5]), int(compressed[6]), int(compressed[7])
    assert before > after > 0 and saved == before - after
    assert plain[5] is None  # not compressed: no token figures
    text = "\n".join(serve.lines)
    assert SENTINEL not in text and "api_key" not in text and "x-api-key" not in text.lower()
    assert "uvicorn" not in text.lower()


def test_no_access_log_without_the_flag(tmp_path, memstrata_home, upstream):
    project = copy_project(tmp_path / "proj")
    with Serve(project, cli_env(memstrata_home), "--no-watch", "--no-mcp") as serve:
        for _ in range(3):
            httpx.get(serve.url + "/health")
    assert access_lines(serve) == []


def test_the_banner_says_mcp_is_off_with_no_mcp(tmp_path, memstrata_home, upstream):
    project = copy_project(tmp_path / "proj")
    with Serve(project, cli_env(memstrata_home), "--no-watch", "--no-mcp") as serve:
        assert httpx.post(serve.url + "/mcp", json={}).status_code == 404
    banner = [line for line in serve.lines if line.strip().startswith("MCP:")]
    assert len(banner) == 1 and "off (--no-mcp)" in banner[0] and "/mcp" not in banner[0]


def test_a_path_cannot_forge_a_line(tmp_path, memstrata_home, upstream, wait_until):
    project = copy_project(tmp_path / "proj")
    with Serve(project, cli_env(memstrata_home), "--openai-upstream", upstream + "/v1", "--no-watch",
               "--access-log") as serve:
        # The ASGI path is percent-decoded: %0A is a newline by the time it is logged.
        httpx.get(serve.url + "/x%0Amemstrata:%20POST%20/v1/chat/completions%20200%201.0%20ms%1b[2J")
        wait_until(lambda: any("/x" in line for line in serve.lines), message="the request's line")
    (line,) = [x for x in serve.lines if "/x" in x]
    assert line.startswith("memstrata: GET /x\\nmemstrata: POST /v1/chat/completions 200 1.0 ms\\x1b[2J 404 ")
    assert not any(x.startswith("memstrata: POST") for x in serve.lines)
