"""``memstrata serve --access-log``: one line per request on stderr.

A line names the method, the path (never the query string, which may carry
a key), the status returned to the client and the time to the last byte,
plus the whole request's tokens before and after compression when the proxy
changed it.  Headers, bodies and keys are never printed.
"""

from __future__ import annotations

import logging
import sys
import time

import anyio

LOGGER = "memstrata.access"
COUNT_WAIT_SECONDS = 5.0  # how long a line waits for its request's token counts


MAX_PATH_CHARS = 300


def printable(text: str) -> str:
    """``text`` with control characters escaped: a request path is percent-decoded, so
    ``%0A`` would otherwise start a forged line of its own."""
    if text.isprintable():
        return text[:MAX_PATH_CHARS]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:MAX_PATH_CHARS])


def format_line(method: str, path: str, status: int | str, duration_ms: float,
                tokens: tuple[int, int] | None = None) -> str:
    line = f"{printable(method)} {printable(path)} {status} {duration_ms:.1f} ms"
    if tokens is not None:
        before, after = tokens
        line += f" tokens {before} -> {after} (saved {before - after})"
    return line


def logger() -> logging.Logger:
    """The access logger, printing to stderr whatever the root logger's level."""
    log = logging.getLogger(LOGGER)
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("memstrata: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


class AccessLog:
    """ASGI middleware writing one line per HTTP request once its response is complete.

    The proxy leaves its token counting in ``request.state.counting``; the
    line waits (off the response: the client already has every byte) until
    those counts are in.
    """

    def __init__(self, app, log: logging.Logger | None = None):
        self.app = app
        self.log = log or logger()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        status: list[int] = []

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            duration_ms = (time.perf_counter() - t0) * 1000
            counting = scope.get("state", {}).get("counting")
            tokens = None
            if counting is not None and counting.changed:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(counting.wait, COUNT_WAIT_SECONDS)
                tokens = counting.tokens()
            self.log.info(format_line(scope.get("method", "-"), scope.get("path", "-"),
                                      status[0] if status else "-", duration_ms, tokens))
