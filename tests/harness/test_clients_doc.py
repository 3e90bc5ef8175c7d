"""docs/clients.md is exact: every server entry it gives starts and answers over a real
MCP session, and every base URL it gives reaches the proxy's endpoints with the
official SDKs (or, for Continue, the URL Continue builds from ``apiBase``)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import anthropic
import anyio
import httpx
import openai
import pytest
import yaml
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.forward import ProxyConfig
from memstrata.indexer.workspace import Workspace
from tests.stub_provider import ServerThread, StubUpstream

from .serve_helpers import REPO, copy_project

DOC = REPO / "docs" / "clients.md"
PLACEHOLDER = "/abs/path/to/project"
DB_PLACEHOLDER = "/absolute/path/to/my-db"
TOOLS = {"memstrata": {"context_query", "index_status", "savings_summary"}, "kura": {"list_rag", "search_rag"},
         "strata": {"strata_guide", "strata_command", "strata_kv_put", "strata_branch_fork"},
         "stormbuffer-mcp": {"memory_recall", "memory_get", "memory_remember", "memory_update", "memory_forget"}}
# The command lines the original products document (shared/seeds): the entries must keep them.
SEEDED = {"strata": ("strata", ["/absolute/path/to/my-db", "mcp", "serve"]),
          "stormbuffer": ("stormbuffer-mcp", ["--stdio", "--project"])}


@dataclass(frozen=True)
class Entry:
    where: str
    name: str
    command: str
    args: tuple[str, ...]


def blocks() -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def stdio_entries() -> list[Entry]:
    out = []
    for lang, body in blocks():
        if lang == "json":
            for name, cfg in json.loads(body).get("mcpServers", {}).items():
                if "command" in cfg:
                    out.append(Entry("json", name, cfg["command"], tuple(cfg.get("args", []))))
        elif lang == "toml":
            for name, cfg in tomllib.loads(body).get("mcp_servers", {}).items():
                out.append(Entry("codex config.toml", name, cfg["command"], tuple(cfg.get("args", []))))
        elif lang == "yaml":
            for cfg in yaml.safe_load(body).get("mcpServers", []):
                out.append(Entry("continue config.yaml", cfg["name"], cfg["command"], tuple(cfg.get("args", []))))
        elif lang == "sh":
            for line in body.splitlines():
                words = shlex.split(line)
                if words[:3] in (["claude", "mcp", "add"], ["codex", "mcp", "add"]) and "--" in words:
                    cut = words.index("--")
                    command, *args = words[cut + 1:]
                    out.append(Entry(f"{words[0]} mcp add", words[3], command, tuple(args)))
    return out


def http_mcp_urls() -> list[str]:
    urls = []
    for lang, body in blocks():
        if lang == "json":
            urls += [cfg["url"] for cfg in json.loads(body).get("mcpServers", {}).values() if "url" in cfg]
        elif lang == "sh":
            urls += re.findall(r"claude mcp add --transport http \S+ (\S+)", body)
    return urls


def test_the_doc_covers_every_client_and_server():
    entries = stdio_entries()
    wheres = {e.where for e in entries}
    assert {"json", "codex config.toml", "continue config.yaml", "claude mcp add", "codex mcp add"} <= wheres
    for where in wheres:
        names = {e.name for e in entries if e.where == where}
        assert {"memstrata", "kura"} <= names, where
    text = DOC.read_text()
    for client in ("Claude Code", "Codex CLI", "Cursor", "Aider", "Continue", "mcpServers"):
        assert f"## {client}" in text or f"## Any `{client}` host" in text, client
    assert "--openai-api-base http://127.0.0.1:8080/v1" in text
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:8080/anthropic" in text


def test_strata_and_stormbuffer_entries_carry_the_seeds_command_lines():
    seeded = [e for e in stdio_entries() if e.name in SEEDED]
    assert {e.where for e in seeded} >= {"json", "claude mcp add", "codex mcp add"}
    for e in seeded:
        assert (e.command, list(e.args)) == SEEDED[e.name], e
    assert "slot" not in DOC.read_text().lower()  # they are working servers now


def _env(tmp: Path) -> dict:
    env = dict(os.environ, MEMSTRATA_HOME=str(tmp / "memstrata_home"), KURA_HOME=str(tmp / "kura_home"),
               XDG_DATA_HOME=str(tmp / "xdg_data"), XDG_CACHE_HOME=str(tmp / "xdg_cache"))
    # the console scripts of this environment, as an installed client would find them
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


async def _tools(command: str, args: list[str], env: dict, cwd: Path) -> set[str]:
    params = StdioServerParameters(command=shutil.which(command, path=env["PATH"]) or command, args=args, env=env,
                                   cwd=str(cwd))
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        return {t.name for t in (await s.list_tools()).tools}


def test_every_entry_starts_and_lists_its_tools(tmp_path):
    project = copy_project(tmp_path / "project")
    db = tmp_path / "my-db"
    env = _env(tmp_path)
    runnable = [e for e in stdio_entries() if e.command in TOOLS]
    assert len(runnable) >= 15
    assert {e.command for e in runnable} == set(TOOLS)
    seen: dict[tuple, set[str]] = {}
    for e in runnable:
        args = [a.replace(PLACEHOLDER, str(project)).replace(DB_PLACEHOLDER, str(db)) for a in e.args]
        key = (e.command, tuple(args))
        if key not in seen:  # started from the project folder, as the doc says a host must
            seen[key] = anyio.run(_tools, e.command, args, env, project)
        assert TOOLS[e.command] <= seen[key], e
    assert (db / "strata.db").is_file()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    root = copy_project(tmp_path_factory.mktemp("clients") / "project")
    ws = Workspace.open(root)
    ws.index()
    stub = StubUpstream(answer="Use AuthService.login.")
    with ServerThread(stub.app) as upstream:
        cfg = ProxyConfig(openai_base=upstream.url + "/v1", anthropic_base=upstream.url, trust_env=False)
        with ServerThread(build_app(ws, HarnessConfig(proxy=cfg))) as server:
            server.stub = stub
            yield server
    ws.close()


def local(url: str, server) -> str:
    assert url.startswith("http://127.0.0.1:8080"), url
    return url.replace("127.0.0.1:8080", f"127.0.0.1:{server.port}")


def test_every_base_url_reaches_the_proxy(proxy):
    text = DOC.read_text()
    url = r"(http://[^\s`;)]+)"
    urls = {"anthropic": set(re.findall("ANTHROPIC_BASE_URL=" + url, text)),
            "openai": set(re.findall("OPENAI_BASE_URL=" + url, text)) | set(re.findall("OPENAI_API_BASE=" + url, text))
            | set(re.findall("--openai-api-base " + url, text))}
    assert urls == {"anthropic": {"http://127.0.0.1:8080/anthropic"}, "openai": {"http://127.0.0.1:8080/v1"}}
    for url in urls["openai"]:
        client = openai.OpenAI(base_url=local(url, proxy), api_key="k", max_retries=0)
        r = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content == "Use AuthService.login."
        assert proxy.stub.received[-1].path == "/v1/chat/completions"
    for url in urls["anthropic"]:
        client = anthropic.Anthropic(base_url=local(url, proxy), api_key="k", max_retries=0)
        r = client.messages.create(model="claude-sonnet-4-6", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
        assert r.content[0].text == "Use AuthService.login."
        assert proxy.stub.received[-1].path == "/v1/messages"


def test_continue_api_bases_land_on_the_proxy_endpoints(proxy):
    (body,) = [b for lang, b in blocks() if lang == "yaml"]
    models = yaml.safe_load(body)["models"]
    assert {m["provider"] for m in models} == {"openai", "anthropic"}
    for m in models:
        base = local(m["apiBase"], proxy)
        if m["provider"] == "openai":  # Continue's OpenAI provider posts to apiBase + chat/completions
            url = base.rstrip("/") + "/chat/completions"
            payload = {"model": m["model"], "messages": [{"role": "user", "content": "hi"}]}
            headers = {"authorization": "Bearer k"}
        else:  # and its Anthropic provider to new URL("messages", apiBase)
            url = httpx.URL(base).join("messages")
            payload = {"model": m["model"], "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
            headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        r = httpx.post(str(url), json=payload, headers=headers)
        assert r.status_code == 200, (m["name"], str(url), r.text)


def test_http_mcp_urls_answer(proxy):
    urls = http_mcp_urls()
    assert urls

    async def tools(url: str) -> set[str]:
        async with streamable_http_client(url) as (r, w, *_), ClientSession(r, w) as s:
            await s.initialize()
            return {t.name for t in (await s.list_tools()).tools}

    for url in urls:
        assert TOOLS["memstrata"] <= anyio.run(tools, local(url, proxy))
