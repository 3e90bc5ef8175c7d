"""A stand-in model provider for tests and benchmarks (no network needed).

It speaks the wire formats the proxy forwards — OpenAI chat/completions,
OpenAI responses and Anthropic messages, as JSON and as SSE streams
(Anthropic's event types, OpenAI's ``data: [DONE]``, the Responses API's
``response.*`` events) — and records what it received so a test can
assert what was forwarded.  The request's ``model`` picks a behaviour:

==============  ===============================================================
``stub-401``    401 in the provider's error shape
``stub-429``    429 with ``retry-after``
``stub-529``    529 overloaded
``stub-gated``  stream: first chunk, then wait for :attr:`StubUpstream.gate`
``stub-drop``   stream (or JSON): a few bytes, then the connection is cut
``stub-slow``   stream with ``slow_delay`` seconds between chunks
``stub-hang``   accept, then answer nothing for ``hang_seconds`` (or until the caller hangs up:
                counted in :attr:`StubUpstream.abandoned`)
``stub-stall``  JSON: the headers and part of the body, then nothing (a test kills the process)
``stub-short``  stream: a few events, then a clean close before the final event (an overloaded cut)
anything else   a normal answer with :attr:`StubUpstream.answer` as its text
==============  ===============================================================

Usage carries the providers' cache fields (Anthropic ``cache_read_input_tokens``
/ ``cache_creation_input_tokens``, OpenAI ``prompt_tokens_details.cached_tokens``),
zero by default so identical requests get identical bytes.  With
``prompt_cache=True`` the stub keeps the prompts it answered and reports the
longest prefix a new one shares with them as cached (1024 tokens at least),
as the providers do: Anthropic only for requests carrying a ``cache_control``
marker (the rest of the prompt is then reported as written to the cache),
OpenAI automatically, in steps of 128.

It is test support, so it lives under ``tests/`` and is not shipped; the
``bench/`` scripts use this very module (run from the repository root).  Run
it alone with ``python -m tests.stub_provider --port 0``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

DEFAULT_ANSWER = "The login flow is in AuthService.login, which calls hash_password and constant_time_eq."


@dataclass
class Received:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


class _Dropped(Exception):
    """Raised inside a response stream to cut the connection."""


class StubUpstream:
    def __init__(self, answer: str = DEFAULT_ANSWER, *, record: bool = True, chunks: int = 8,
                 slow_delay: float = 0.05, hang_seconds: float = 30.0, gate_timeout: float = 20.0,
                 created: int = 1_700_000_000, prompt_cache: bool = False):
        self.answer = answer
        self.prompt_cache = prompt_cache
        self._prompts: dict[str, list[str]] = {"openai": [], "anthropic": [], "responses": []}
        self.created = created  # fixed, so identical requests get identical bytes
        self.record = record
        self.chunks = chunks
        self.slow_delay = slow_delay
        self.hang_seconds = hang_seconds
        self.gate_timeout = gate_timeout
        self.received: list[Received] = []
        self.abandoned = 0  # stub-hang requests whose caller closed the connection before the answer
        self.gate = threading.Event()
        self.gate_timed_out = False
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self._openai, methods=["POST"]),
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1/messages", self._anthropic, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ])

    @contextlib.contextmanager
    def running(self) -> Iterator["StubUpstream"]:
        """This stand-in answering on a loopback port of its own for the block (``url`` set)."""
        with ServerThread(self.app) as server:
            self.url = server.url
            yield self

    # -- helpers ------------------------------------------------------------------

    async def _hang(self, request: Request) -> None:
        deadline = asyncio.get_running_loop().time() + self.hang_seconds
        while asyncio.get_running_loop().time() < deadline:
            if await request.is_disconnected():
                self.abandoned += 1
                return
            await asyncio.sleep(0.02)

    async def _receive(self, request: Request) -> tuple[dict | None, Response | None]:
        body = await request.body()
        if self.record:
            self.received.append(Received(request.method, request.url.path, request.url.query,
                                          dict(request.headers), body))
        try:
            data = json.loads(body)
        except ValueError:
            return None, JSONResponse({"error": {"message": "stub: bad JSON", "type": "invalid_request_error"}}, 400)
        return data, None

    def _pieces(self) -> list[str]:
        words = self.answer.split(" ")
        n = max(1, min(self.chunks, len(words)))
        size = -(-len(words) // n)
        return [" ".join(words[i:i + size]) + (" " if i + size < len(words) else "")
                for i in range(0, len(words), size)]

    @staticmethod
    def _error(api: str, status: int, kind: str, message: str, headers: dict | None = None) -> JSONResponse:
        if api == "anthropic":
            body = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
        return JSONResponse(body, status_code=status, headers=headers)

    def _behaviour(self, api: str, model: str) -> Response | None:
        if model == "stub-401":
            return self._error(api, 401, "authentication_error", "invalid x-api-key")
        if model == "stub-429":
            return self._error(api, 429, "rate_limit_error", "rate limited", {"retry-after": "7"})
        if model == "stub-529":
            return self._error(api, 529, "overloaded_error", "Overloaded")
        return None

    async def _pace(self, model: str, i: int) -> None:
        if model == "stub-gated" and i == 1:
            ok = await asyncio.to_thread(self.gate.wait, self.gate_timeout)
            if not ok:
                self.gate_timed_out = True
        elif model == "stub-slow" and i > 0:
            await asyncio.sleep(self.slow_delay)
        elif model == "stub-drop" and i == 2:
            raise _Dropped()

    def _cached_chars(self, api: str, prompt_text: str) -> int:
        """Characters of ``prompt_text`` a previous prompt shares (0 without prompt_cache); remembers it."""
        if not self.prompt_cache:
            return 0
        best = 0
        for seen in self._prompts[api]:
            n = 0
            for a, b in zip(seen, prompt_text):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        self._prompts[api] = (self._prompts[api] + [prompt_text])[-32:]
        return best

    def _openai_usage(self, data: dict, completion: int) -> dict:
        text = json.dumps(data.get("messages", ""))
        prompt = len(text) // 4
        cached = min(self._cached_chars("openai", text) // 4, prompt)
        cached = cached // 128 * 128 if prompt >= 1024 and cached >= 1024 else 0
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}

    def _anthropic_usage(self, data: dict, output: int) -> dict:
        text = json.dumps(data.get("messages", ""))
        prompt = len(text) // 4
        marked = "cache_control" in json.dumps([data.get("system"), data.get("tools"), data.get("messages")])
        read = min(self._cached_chars("anthropic", text) // 4, prompt) if marked else 0
        read = read if read >= 1024 else 0  # the providers cache nothing shorter
        write = prompt - read if marked else 0
        return {"input_tokens": prompt - read - write, "output_tokens": output,
                "cache_read_input_tokens": read, "cache_creation_input_tokens": write}

    # -- OpenAI ---------------------------------------------------------------------

    async def _openai(self, request: Request) -> Response:
        data, bad = await self._receive(request)
        if bad:
            return bad
        model = str(data.get("model", ""))
        if (err := self._behaviour("openai", model)) is not None:
            return err
        if model == "stub-hang":
            await self._hang(request)
        usage = self._openai_usage(data, len(self.answer.split()))
        created = self.created
        if data.get("stream") is True:
            include_usage = bool((data.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(_short(model, self._openai_stream(model, created, usage, include_usage)),
                                     media_type="text/event-stream", headers={"x-request-id": "req_stub"})
        if model == "stub-drop":
            return StreamingResponse(self._drop_json(), media_type="application/json")
        if model == "stub-stall":
            return StreamingResponse(self._stall_json(), media_type="application/json")
        return JSONResponse({
            "id": "chatcmpl-stub", "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer, "refusal": None},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": usage,
        }, headers={"x-request-id": "req_stub"})

    async def _openai_stream(self, model, created, usage, include_usage):
        def chunk(delta, finish=None, usage=None, choices=True):
            obj = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}] if choices
                   else []}
            if usage is not None:
                obj["usage"] = usage
            return f"data: {json.dumps(obj)}\n\n".encode()

        yield chunk({"role": "assistant", "content": ""})
        for i, piece in enumerate(self._pieces(), start=1):
            await self._pace(model, i)
            yield chunk({"content": piece})
        yield chunk({}, "stop")
        if include_usage:
            yield chunk(None, usage=usage, choices=False)
        yield b"data: [DONE]\n\n"

    async def _drop_json(self):
        yield b'{"id": "chatcmpl-stub", "object": "chat.'
        raise _Dropped()

    async def _stall_json(self):
        yield b'{"id": "stub", "content": "part of an answer'
        await asyncio.sleep(3600)

    # -- OpenAI Responses -------------------------------------------------------------

    def _responses_usage(self, data: dict, output: int) -> dict:
        text = json.dumps([data.get("instructions"), data.get("input", "")])
        prompt = len(text) // 4
        cached = min(self._cached_chars("responses", text) // 4, prompt)
        cached = cached // 128 * 128 if prompt >= 1024 and cached >= 1024 else 0
        return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + output}

    def _response_object(self, model: str, status: str, usage: dict | None, text: str | None) -> dict:
        output = [] if text is None else [{
            "type": "message", "id": "msg_stub", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}]
        return {"id": "resp_stub", "object": "response", "created_at": self.created, "status": status,
                "model": model, "output": output, "usage": usage, "error": None, "incomplete_details": None,
                "instructions": None, "metadata": {}, "parallel_tool_calls": True, "temperature": 1.0,
                "tool_choice": "auto", "tools": [], "top_p": 1.0}

    async def _responses(self, request: Request) -> Response:
        data, bad = await self._receive(request)
        if bad:
            return bad
        model = str(data.get("model", ""))
        if (err := self._behaviour("openai", model)) is not None:
            return err
        usage = self._responses_usage(data, len(self.answer.split()))
        if data.get("stream") is True:
            return StreamingResponse(_short(model, self._responses_stream(model, usage)), media_type="text/event-stream",
                                     headers={"x-request-id": "req_stub"})
        if model == "stub-drop":
            return StreamingResponse(self._drop_json(), media_type="application/json")
        return JSONResponse(self._response_object(model, "completed", usage, self.answer),
                            headers={"x-request-id": "req_stub"})

    async def _responses_stream(self, model: str, usage: dict):
        seq = 0

        def event(kind, **fields):
            nonlocal seq
            seq += 1
            return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq, **fields})}\n\n".encode()

        yield event("response.created", response=self._response_object(model, "in_progress", None, None))
        item = {"type": "message", "id": "msg_stub", "status": "in_progress", "role": "assistant", "content": []}
        yield event("response.output_item.added", output_index=0, item=item)
        yield event("response.content_part.added", item_id="msg_stub", output_index=0, content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []})
        for i, piece in enumerate(self._pieces(), start=1):
            await self._pace(model, i)
            yield event("response.output_text.delta", item_id="msg_stub", output_index=0, content_index=0,
                        delta=piece)
        yield event("response.output_text.done", item_id="msg_stub", output_index=0, content_index=0,
                    text=self.answer)
        yield event("response.completed", response=self._response_object(model, "completed", usage, self.answer))

    # -- Anthropic ------------------------------------------------------------------

    async def _anthropic(self, request: Request) -> Response:
        data, bad = await self._receive(request)
        if bad:
            return bad
        model = str(data.get("model", ""))
        if (err := self._behaviour("anthropic", model)) is not None:
            return err
        if model == "stub-hang":
            await self._hang(request)
        completion = len(self.answer.split())
        if data.get("stream") is True:
            usage = self._anthropic_usage(data, 1)
            return StreamingResponse(_short(model, self._anthropic_stream(model, usage, completion)),
                                     media_type="text/event-stream", headers={"request-id": "req_stub"})
        if model == "stub-drop":
            return StreamingResponse(self._drop_json(), media_type="application/json")
        if model == "stub-stall":
            return StreamingResponse(self._stall_json(), media_type="application/json")
        return JSONResponse({
            "id": "msg_stub", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": self.answer}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": self._anthropic_usage(data, completion),
        }, headers={"request-id": "req_stub"})

    async def _anthropic_stream(self, model, usage, completion):
        def event(kind, obj):
            return f"event: {kind}\ndata: {json.dumps(obj)}\n\n".encode()

        yield event("message_start", {"type": "message_start", "message": {
            "id": "msg_stub", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}})
        yield event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}})
        yield event("ping", {"type": "ping"})
        for i, piece in enumerate(self._pieces(), start=1):
            await self._pace(model, i)
            yield event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": piece}})
        yield event("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield event("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                      "usage": {"output_tokens": completion}})
        yield event("message_stop", {"type": "message_stop"})

    async def _count_tokens(self, request: Request) -> Response:
        data, bad = await self._receive(request)
        if bad:
            return bad
        return JSONResponse({"input_tokens": len(json.dumps(data.get("messages", ""))) // 4})

    async def _models(self, request: Request) -> Response:
        if self.record:
            self.received.append(Received(request.method, request.url.path, request.url.query,
                                          dict(request.headers), b""))
        return JSONResponse({"object": "list", "data": [
            {"id": "gpt-4o", "object": "model", "created": 0, "owned_by": "stub"}]})


class ServerThread:
    """uvicorn serving ``app`` on an ephemeral loopback port in a background thread."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, log_level: str = "critical", **config):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host, self.port = self.sock.getsockname()[:2]
        config.setdefault("access_log", False)
        config.setdefault("timeout_graceful_shutdown", 2)
        self.server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, **config))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()

    def __enter__(self) -> "ServerThread":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()



async def _short(model: str, events):
    """``events`` whole, or for ``stub-short`` its first three chunks and a clean close."""
    n = 0
    async for chunk in events:
        if model == "stub-short" and n == 3:
            return
        n += 1
        yield chunk


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Serve the stand-in model provider (for tests and benchmarks).")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--prompt-cache", action="store_true", help="report shared prompt prefixes as cached")
    p.add_argument("--slow-delay", type=float, default=0.05, help="seconds between chunks of stub-slow")
    args = p.parse_args(argv)
    stub = StubUpstream(record=False, chunks=args.chunks, prompt_cache=args.prompt_cache,
                        slow_delay=args.slow_delay)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    # Listening before the port is told: a client that connects at once waits in the
    # backlog until the server accepts, instead of being refused while it starts up.
    sock.listen(2048)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(stub.app, log_level="critical", access_log=False)).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

