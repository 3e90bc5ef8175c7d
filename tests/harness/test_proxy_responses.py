"""OpenAI's Responses API through the proxy: the openai SDK's ``client.responses`` -> memstrata -> stub."""

import json
import logging

import httpx
import openai
import pytest

from memstrata.harness.proxy.analysis import prompt_tokens
from memstrata.harness.proxy.gutter import unpad_gutter
from memstrata.storage import ledger
from tests.harness.test_proxy import ANSWER, SENTINEL, make_app, pasted_request
from tests.harness.test_proxy import project  # noqa: F401 - the indexed fixture project, a fixture
from tests.stub_provider import ServerThread, StubUpstream


@pytest.fixture(scope="module")
def stub():
    with StubUpstream(answer=ANSWER).running() as s:
        yield s


@pytest.fixture(scope="module")
def proxy(project, stub):  # noqa: F811
    app = make_app(project, stub.url)
    with ServerThread(app) as server:
        server.app = app
        yield server


def client(proxy):
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=SENTINEL, max_retries=0)


def last_row(proxy, project):  # noqa: F811
    proxy.app.state.harness.flush()
    return ledger.entries(project.store, limit=1)[-1]


def test_pasted_code_is_compressed_and_recorded(project, proxy, stub):  # noqa: F811
    question = pasted_request(project)
    resp = client(proxy).responses.create(model="gpt-4o", instructions="You are terse.", input=[
        {"role": "user", "content": [{"type": "input_text", "text": question}]}])
    assert resp.output_text == ANSWER
    sent = stub.received[-1]
    assert sent.path == "/v1/responses"
    forwarded = sent.json()
    assert forwarded["instructions"] == "You are terse."
    part = forwarded["input"][0]["content"][0]
    assert part["type"] == "input_text"  # the item keeps its own wire shape
    text = part["text"]
    assert "[memstrata:" in text and "def login" in text and "def render_invoice" not in text
    assert text.rstrip().endswith("Keep it short.")
    original = {"instructions": "You are terse.", "input": [{"role": "user", "content": question}]}
    assert prompt_tokens(forwarded, "responses") < prompt_tokens(original, "responses")
    row = last_row(proxy, project)
    assert row.endpoint == "openai.responses" and row.compressed and row.status == 200
    assert row.tokens_saved > 0 and row.mode == "safe" and row.conversation
    assert row.input_tokens > 0
    assert row.output_tokens == len(ANSWER.split())
    assert "app/billing.py" in row.sources  # the files forwarded in a changed form


def test_string_input_streamed(project, proxy, stub):  # noqa: F811
    question = pasted_request(project)
    stream = client(proxy).responses.create(model="gpt-4o", input=question, stream=True)
    deltas, final = [], None
    for event in stream:
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        elif event.type == "response.completed":
            final = event.response
    assert "".join(deltas) == ANSWER and final is not None and final.usage.output_tokens > 0
    forwarded = stub.received[-1].json()
    assert isinstance(forwarded["input"], str) and "[memstrata:" in forwarded["input"]
    row = last_row(proxy, project)
    assert row.endpoint == "openai.responses" and row.stream and row.compressed
    assert row.output_tokens == final.usage.output_tokens
    assert row.input_tokens == final.usage.input_tokens - final.usage.input_tokens_details.cached_tokens


def test_tool_outputs_are_pieces_and_calls_stay(project, proxy, stub):  # noqa: F811
    """A Codex-style read: function_call + function_call_output holding `cat -n` text."""
    code = (project.root / "app" / "billing.py").read_text()
    numbered = "\n".join(f"{i:6}\t{line}" for i, line in enumerate(code.split("\n"), 1))
    call = {"type": "function_call", "call_id": "call_1", "name": "shell",
            "arguments": json.dumps({"command": ["cat", "-n", "app/billing.py"]})}
    items = [{"role": "user", "content": "How is the tax computed in Invoice.tax_cents?"}, call,
             {"type": "function_call_output", "call_id": "call_1", "output": numbered}]
    client(proxy).responses.create(model="gpt-4o", input=items)
    forwarded = stub.received[-1].json()["input"]
    assert forwarded[1] == call
    assert forwarded[2]["type"] == "function_call_output" and forwarded[2]["call_id"] == "call_1"
    out = forwarded[2]["output"]
    assert "def tax_cents" in out
    row = last_row(proxy, project)
    assert row.endpoint == "openai.responses" and row.status == 200
    if "[memstrata:" in out:  # over the fixture's result cap: cut down around what the question names
        assert len(out) < len(numbered)
    else:
        assert out == unpad_gutter(numbered)  # whole: every line and number, without the numbers' padding
    assert row.compressed


def test_upstream_error_passes_through(proxy, stub):
    with pytest.raises(openai.RateLimitError):
        client(proxy).responses.create(model="stub-429", input="hi")


MALFORMED = [
    {"model": "gpt-4o", "input": 5, "instructions": ["x"]},
    {"model": "gpt-4o", "input": {"role": "user", "content": "hi there"}, "instructions": {"text": 3}},
    {"model": "gpt-4o", "input": None, "instructions": 7, "tools": "none"},
    {"model": "gpt-4o", "input": [5, "loose text", None, {"role": 3, "content": ["x", 1]},
                                  {"type": "function_call", "name": 5, "arguments": {"a": 1}},
                                  {"type": "function_call_output", "output": {"b": 2}}],
     "instructions": [{"type": "input_text", "text": "be terse"}, 3], "tools": [None, 4]},
]


@pytest.mark.parametrize("body", MALFORMED)
def test_a_malformed_request_is_forwarded_and_counted_without_a_warning(project, proxy, stub, body,  # noqa: F811
                                                                        caplog):
    # The provider answers a request of the wrong shape (with its own error); the proxy forwards it as
    # sent, counts what it can count and bills the counterfactual, and has nothing to warn about.
    with caplog.at_level(logging.WARNING):
        r = httpx.post(proxy.url + "/v1/responses", json=body, headers={"authorization": f"Bearer {SENTINEL}"})
        row = last_row(proxy, project)
    assert r.status_code == 200 and stub.received[-1].json() == body
    assert row.endpoint == "openai.responses" and row.counted and not row.compressed
    assert row.tokens_original == row.tokens_forwarded == prompt_tokens(body, "responses")
    assert row.cf_input_tokens == row.input_tokens and row.cf_cache_read_tokens == 0
    assert [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.WARNING] == []
