"""Counting a whole request's tokens and reading what the provider answered.

Request tokens are cl100k counts (the offline tiktoken encoding the
compressor uses) summed over every text piece the model is sent: the system
prompt, the tool definitions (each as compact JSON), message text, tool
results, tool-call names and arguments, and thinking text.  Images and other
binary parts are not counted.  This is MemStrata's own yardstick — the
provider's tokenizer differs; the provider's reported usage is kept beside it
in the ledger.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass


from . import token_counts
from .compress_request import ANTHROPIC, OPENAI, RESPONSES
from .responses_api import chat_view

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def _compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def content_texts(value) -> Iterator[str]:
    """Text pieces in a content value (string, list of parts, nested tool results)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for part in value:
            if isinstance(part, dict):
                t = part.get("type")
                if isinstance(part.get("text"), str):
                    yield part["text"]
                elif t == "tool_result":
                    yield from content_texts(part.get("content"))
                elif t in ("tool_use", "server_tool_use"):
                    if isinstance(part.get("name"), str):
                        yield part["name"]
                    yield json.dumps(part.get("input"), ensure_ascii=False)
                elif t == "thinking" and isinstance(part.get("thinking"), str):
                    yield part["thinking"]
                elif t == "document":
                    source = part.get("source") if isinstance(part.get("source"), dict) else {}
                    if source.get("type") == "text" and isinstance(source.get("data"), str):
                        yield source["data"]
                    elif source.get("type") == "content":
                        yield from content_texts(source.get("content"))
                elif isinstance(part.get("refusal"), str):
                    yield part["refusal"]
            elif isinstance(part, str):
                yield part


def tool_definitions(body: dict, api: str) -> Iterator[str]:
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if api == OPENAI and isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            yield _compact(tool["function"])
        elif tool is not None:
            yield _compact(tool)
    functions = body.get("functions")  # OpenAI's legacy function definitions
    for fn in functions if api == OPENAI and isinstance(functions, list) else ():
        yield _compact(fn)


def prompt_texts(body: dict, api: str) -> Iterator[str]:
    """Every text piece of the request the model reads: system, tools, messages."""
    if api == RESPONSES:
        yield from content_texts(body.get("instructions"))
        yield from tool_definitions(body, api)
        view = chat_view(body)
        if view is not None:
            yield from prompt_texts({"messages": view["messages"]}, OPENAI)
        return
    if api == ANTHROPIC:
        yield from content_texts(body.get("system"))
    yield from tool_definitions(body, api)
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            yield from message_texts(m, api)


def message_texts(m: dict, api: str) -> Iterator[str]:
    """The text pieces of one message (its content, and on OpenAI its tool calls)."""
    yield from content_texts(m.get("content"))
    if api != ANTHROPIC:
        calls = list(m.get("tool_calls") or [])
        if isinstance(m.get("function_call"), dict):
            calls.append({"function": m["function_call"]})
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                for key in ("name", "arguments"):
                    if isinstance(fn.get(key), str):
                        yield fn[key]


def _count(text: str) -> int:
    """count_tokens, remembered (agents resend the whole conversation on every turn, so most
    of a request was counted before, by the ledger or by the compressor)."""
    return token_counts.count(text)


def prompt_tokens(body: dict, api: str) -> int:
    return sum(_count(t) for t in prompt_texts(body, api))


@dataclass
class Answer:
    """The answer text and the provider's usage, in provider-neutral terms.

    ``input_tokens`` are the prompt tokens billed at the full input rate:
    Anthropic's ``input_tokens`` as reported; OpenAI's ``prompt_tokens`` minus
    its ``prompt_tokens_details.cached_tokens``.  ``cache_read_tokens`` are
    Anthropic's ``cache_read_input_tokens`` / OpenAI's ``cached_tokens``;
    ``cache_write_tokens`` Anthropic's ``cache_creation_input_tokens``
    (OpenAI reports none: ``None``), of which ``cache_write_1h_tokens`` went to
    its 1-hour cache (``cache_creation.ephemeral_1h_input_tokens``, billed at 2x
    the input rate where 5-minute writes cost 1.25x; ``None`` when the usage has
    no such split: every write a 5-minute one).
    """

    text: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    # Anthropic's server-side context editing: the tool uses its ``clear_tool_uses`` edit cleared from the
    # forwarded request (``context_management.applied_edits``); None when the answer says nothing of it.
    cleared_tool_uses: int | None = None

    def merge_context_management(self, value) -> None:
        edits = value.get("applied_edits") if isinstance(value, dict) else None
        if isinstance(edits, list):
            self.cleared_tool_uses = sum(
                _int(e.get("cleared_tool_uses")) or 0 for e in edits
                if isinstance(e, dict) and str(e.get("type", "")).startswith("clear_tool_uses"))

    def merge_anthropic(self, usage: dict) -> None:
        """Anthropic usage: ``message_start`` carries the input side, ``message_delta``
        the final output count (and, in newer streams, the input side again)."""
        for attr, key in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                          ("cache_read_tokens", "cache_read_input_tokens"),
                          ("cache_write_tokens", "cache_creation_input_tokens")):
            v = _int(usage.get(key))
            if v is not None:
                setattr(self, attr, v)
        split = usage.get("cache_creation")
        if isinstance(split, dict):
            v = _int(split.get("ephemeral_1h_input_tokens"))
            if v is not None:
                self.cache_write_1h_tokens = v

    def set_responses(self, usage: dict) -> None:
        """Responses API usage: ``input_tokens`` with ``input_tokens_details.cached_tokens``."""
        prompt = _int(usage.get("input_tokens"))
        details = usage.get("input_tokens_details") if isinstance(usage.get("input_tokens_details"), dict) else {}
        cached = _int(details.get("cached_tokens"))
        self.cache_read_tokens = cached
        self.input_tokens = None if prompt is None else max(prompt - (cached or 0), 0)
        self.output_tokens = _int(usage.get("output_tokens"))

    def set_openai(self, usage: dict) -> None:
        prompt = _int(usage.get("prompt_tokens"))
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        cached = _int(details.get("cached_tokens"))
        self.cache_read_tokens = cached
        self.input_tokens = None if prompt is None else max(prompt - (cached or 0), 0)
        self.output_tokens = _int(usage.get("completion_tokens"))


def parse_answer(api: str, stream: bool, raw: bytes) -> Answer:
    """The answer text and reported usage from a JSON body or an SSE stream."""
    try:
        if stream or raw.lstrip().startswith((b"data:", b"event:")):
            return _from_sse(api, raw)
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return Answer()
    return _from_json(api, data) if isinstance(data, dict) else Answer()


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _responses_output(data: dict) -> list[str]:
    """Text and tool-call arguments of a Responses API ``response`` object's output items."""
    parts = []
    for item in data.get("output") or []:
        if not isinstance(item, dict):
            continue
        for c in item.get("content") or [] if isinstance(item.get("content"), list) else []:
            if isinstance(c, dict) and isinstance(c.get("text"), str):
                parts.append(c["text"])
        for key in ("arguments", "input"):
            if isinstance(item.get(key), str):
                parts.append(item[key])
    return parts


def _from_json(api: str, data: dict) -> Answer:
    ans = Answer()
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    parts: list[str] = []
    if api == RESPONSES:
        parts = _responses_output(data)
        ans.set_responses(usage)
    elif api == OPENAI:
        for choice in data.get("choices") or []:
            msg = choice.get("message") if isinstance(choice, dict) else None
            if isinstance(msg, dict):
                if isinstance(msg.get("content"), str):
                    parts.append(msg["content"])
                for call in msg.get("tool_calls") or []:
                    fn = call.get("function") if isinstance(call, dict) else None
                    if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                        parts.append(fn["arguments"])
        ans.set_openai(usage)
    else:
        for block in data.get("content") or []:
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "tool_use":
                    parts.append(json.dumps(block.get("input"), ensure_ascii=False))
        ans.merge_anthropic(usage)
        ans.merge_context_management(data.get("context_management"))
    ans.text = "\n".join(parts)
    return ans


def _sse_data(raw: bytes) -> Iterator[dict]:
    for event in re.split(rb"\r?\n\r?\n", raw):
        data_lines = [ln[5:].lstrip() for ln in event.splitlines() if ln.startswith(b"data:")]
        if not data_lines:
            continue
        payload = b"\n".join(data_lines)
        if payload.strip() == b"[DONE]":
            continue
        try:
            obj = json.loads(payload)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def _from_sse(api: str, raw: bytes) -> Answer:
    ans = Answer()
    parts: list[str] = []
    for ev in _sse_data(raw):
        if api == RESPONSES:
            t = ev.get("type")
            if t in ("response.output_text.delta", "response.function_call_arguments.delta") \
                    and isinstance(ev.get("delta"), str):
                parts.append(ev["delta"])
            elif t in ("response.completed", "response.incomplete", "response.failed"):
                response = ev.get("response") if isinstance(ev.get("response"), dict) else {}
                if isinstance(response.get("usage"), dict):
                    ans.set_responses(response["usage"])
        elif api == OPENAI:
            for choice in ev.get("choices") or []:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if isinstance(delta, dict):
                    if isinstance(delta.get("content"), str):
                        parts.append(delta["content"])
                    for call in delta.get("tool_calls") or []:
                        fn = call.get("function") if isinstance(call, dict) else None
                        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                            parts.append(fn["arguments"])
            if isinstance(ev.get("usage"), dict):
                ans.set_openai(ev["usage"])
        else:
            t = ev.get("type")
            if t == "message_start":
                message = ev.get("message") if isinstance(ev.get("message"), dict) else {}
                if isinstance(message.get("usage"), dict):
                    ans.merge_anthropic(message["usage"])
                ans.merge_context_management(message.get("context_management"))
            elif t == "content_block_delta":
                delta = ev.get("delta") or {}
                for key in ("text", "partial_json"):
                    if isinstance(delta.get(key), str):
                        parts.append(delta[key])
            elif t == "message_delta":
                if isinstance(ev.get("usage"), dict):
                    ans.merge_anthropic(ev["usage"])
                ans.merge_context_management(ev.get("context_management"))
    ans.text = "".join(parts)
    return ans


def symbol_overlap(answer: str, slice_symbols: list[str], is_project_name) -> tuple[int, int, int]:
    """(project names the answer uses, names in the slice, names in both).

    Names are symbols' short names (``login`` for ``app/auth/service.py::AuthService.login``);
    the answer "uses" a project symbol when an identifier in it (3+ characters,
    not a dunder) is the name of a symbol the index knows.
    """
    sliced = {sid.partition("::")[2].rsplit(".", 1)[-1] for sid in slice_symbols}
    sliced.discard("")
    used = {w for w in set(_IDENT.findall(answer)) if not w.startswith("__") and is_project_name(w)}
    return len(used), len(sliced), len(used & sliced)
