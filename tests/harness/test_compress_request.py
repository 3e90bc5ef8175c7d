"""What the proxy treats as compressible code context, and what it never touches."""

import copy

import pytest

from memstrata.harness.analysis import parse_answer, prompt_tokens, symbol_overlap
from memstrata.harness.compress_request import CompressionSettings, ProjectMatcher, compress, set_path

LOOSE = CompressionSettings(min_tokens=20, budget_ratio=0.9, min_run_lines=3)


@pytest.fixture(scope="module")
def ws(python_ws):
    return python_ws


@pytest.fixture(scope="module")
def matcher(ws):
    return ProjectMatcher(ws)


def read(ws, path):
    return (ws.root / path).read_text()


def test_fenced_project_code_is_replaced_with_its_fence(ws, matcher):
    code = read(ws, "app/auth/service.py") + "\n" + read(ws, "app/reports.py")
    text = f"Please look.\n\n```python\n{code}```\n\nWhy can AuthService.login raise InvalidCredentials?"
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    original = copy.deepcopy(body)
    res = compress(body, "openai", matcher, LOOSE)
    assert res.changed, res.reason
    assert body == original  # the caller's body is not mutated
    out = res.body["messages"][0]["content"]
    assert out.startswith("Please look.\n\n[memstrata: ")
    assert out.endswith("\n\nWhy can AuthService.login raise InvalidCredentials?")
    assert out.count("```") == 2  # the slice's own fence; the pasted fence went with the code
    assert res.question.endswith("raise InvalidCredentials?") and "def login" not in res.question
    assert "app/auth/service.py" in res.sources and res.slice_symbols
    assert prompt_tokens(res.body, "openai") < prompt_tokens(body, "openai")


def test_small_or_foreign_code_and_other_roles_untouched(ws, matcher):
    foreign = "```python\n" + "\n".join(f"def helper_{i}(x):\n    return x + {i}" for i in range(40)) + "\n```"
    service = read(ws, "app/auth/service.py")
    body = {"model": "m", "messages": [
        {"role": "system", "content": service},              # system prompt: never touched
        {"role": "assistant", "content": service},           # assistant turns: never touched
        {"role": "user", "content": foreign + "\nWhat does AuthService.login do?"},
    ]}
    res = compress(body, "openai", matcher, LOOSE)
    assert not res.changed and res.reason == "no project code in the request"
    tiny = {"model": "m", "messages": [{"role": "user", "content": read(ws, "app/session.py") + "\nExplain."}]}
    assert not compress(tiny, "openai", matcher, CompressionSettings(min_tokens=10_000)).changed


def test_openai_tool_message_and_tool_calls_kept(ws, matcher):
    code = read(ws, "app/auth/service.py") + "\n" + read(ws, "app/routes.py")
    call = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "app"}'}}
    body = {"model": "m", "messages": [
        {"role": "user", "content": "How is login_route wired to AuthService.login?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": code},
    ]}
    res = compress(body, "openai", matcher, LOOSE)
    assert res.changed, res.reason
    msgs = res.body["messages"]
    assert msgs[0] == body["messages"][0] and msgs[1] == body["messages"][1]
    assert msgs[2]["tool_call_id"] == "call_1" and msgs[2]["role"] == "tool"
    assert msgs[2]["content"].startswith("[memstrata: ")


def test_set_path_copies_only_the_path():
    root = {"a": [{"b": "x"}, {"c": "y"}], "d": {"e": 1}}
    new = set_path(root, ("a", 0, "b"), "z")
    assert root["a"][0]["b"] == "x" and new["a"][0]["b"] == "z"
    assert new["d"] is root["d"] and new["a"][1] is root["a"][1]


def test_answer_parsing_and_overlap():
    sse = (b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":12,'
           b'"output_tokens":1}}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
           b'"delta":{"type":"text_delta","text":"call login"}}\n\nevent: message_delta\ndata: {"type":'
           b'"message_delta","usage":{"output_tokens":7}}\n\n')
    a = parse_answer("anthropic", True, sse)
    assert (a.text, a.input_tokens, a.output_tokens) == ("call login", 12, 7)
    o = parse_answer("openai", True, b'data: {"choices":[{"delta":{"content":"hi "}}]}\n\ndata: {"choices":[],'
                                      b'"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n')
    assert (o.text, o.input_tokens, o.output_tokens) == ("hi ", 3, 2)
    names = {"login", "logout", "audit", "hash_password"}
    # answer uses login + audit (project) and print (not project); slice has login, logout, hash_password
    assert symbol_overlap("Use login() then audit; print it", ["a.py::S.login", "a.py::S.logout", "b.py::hash_password"],
                          names.__contains__) == (2, 3, 1)
