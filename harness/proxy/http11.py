"""uvicorn's HTTP/1.1 protocol with clean answers to requests too large to parse.

uvicorn answers a request line or header block larger than h11's buffer
with a bare ``400`` and closes the socket at once; a client still sending
its long URL then gets a TCP reset instead of the answer.  This protocol
answers ``414`` (request line) or ``431`` (headers) in the provider's error
shape, half-closes, and reads and discards what the client still sends for
a moment, so the client gets to read the answer.
"""

from __future__ import annotations

import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .upstream import api_for_path, error_body

LINGER_SECONDS = 2.0
# How long an idle client connection stays open.  A client reuses a pooled
# connection until its own idle limit (httpx 5 s, aiohttp 15 s, Go 90 s); a
# server that closes sooner can close one just as a request goes out on it,
# and the client sees the request fail.  uvicorn's default is 5 s.
CLIENT_KEEPALIVE_S = 120
_REASONS = {414: b"URI Too Long", 431: b"Request Header Fields Too Large"}


class ProxyH11Protocol(H11Protocol):
    _draining = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = max(self.timeout_keep_alive, CLIENT_KEEPALIVE_S)

    def data_received(self, data: bytes) -> None:
        if self._draining:
            return  # the answer is out; what the client still sends is read and dropped
        super().data_received(data)

    def eof_received(self) -> None:
        if self._draining:
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        status = self._oversized_status()
        if status is None:
            return super().send_400_response(msg)
        pending = self._pending()
        path = pending.split(b" ", 2)[1].decode("latin-1", "replace") if pending.count(b" ") >= 1 else ""
        message = ("the request URL is too long" if status == 414 else "the request headers are too large")
        body = json.dumps(error_body(api_for_path(path), status, message)).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
                   (b"content-length", str(len(body)).encode())]
        try:
            self.transport.write(self.conn.send(h11.Response(status_code=status, headers=headers,
                                                             reason=_REASONS[status])) or b"")
            self.transport.write(self.conn.send(h11.Data(data=body)) or b"")
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            self.transport.close()
            return
        self._draining = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _pending(self) -> bytes:
        buf = getattr(self.conn, "_receive_buffer", None)  # h11 keeps the unparsed bytes here
        try:
            return bytes(buf) if buf is not None else b""
        except TypeError:
            return b""

    def _oversized_status(self) -> int | None:
        limit = getattr(self.conn, "_max_incomplete_event_size", None)
        pending = self._pending()
        if limit is None or len(pending) <= limit:
            return None
        return 431 if b"\r\n" in pending[:limit] else 414
