"""Where requests go and how errors look in each provider's own shape."""

from __future__ import annotations

import importlib.util
import json
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from .providers import DEFAULT_ANTHROPIC_BASE, DEFAULT_OPENAI_BASE  # noqa: F401 - re-exported
from .request_blocks import ANTHROPIC, OPENAI

# Connection-level headers are per hop (RFC 9110 §7.6.1); the body is re-sent,
# so its length and encoding are recomputed.
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
    "trailer", "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
})
RESPONSE_DROP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "content-length", "content-encoding", "date", "server",
})

# How long an idle upstream connection is kept for reuse.  A server closes
# idle connections on a timer of its own (5 s is the common default: uvicorn,
# Node); a request sent on a connection the server is closing at that moment
# is lost ("closed the connection without an answer") and, being a POST, is
# not safe to send again.  Dropping idle connections first, before the
# shortest such timer, leaves no such race; a new connection costs a handshake
# only after an idle pause of this length.
UPSTREAM_KEEPALIVE_S = 4.0


def _without_userinfo(url: str) -> str:
    """``url`` with everything between ``//`` and the last ``@`` dropped: a password may hold
    ``/``, ``?`` or ``#``, which would end the authority for a URL parser before its ``@``."""
    scheme, sep, rest = url.partition("//")
    return scheme + sep + rest.rsplit("@", 1)[-1] if sep else url


def shown_host(url: str) -> str:
    """The host (and port) of ``url`` as messages and logs may show it: never a ``user:password@``
    an upstream URL can carry (credentials go to the upstream and nowhere else)."""
    return urlsplit(_without_userinfo(url)).netloc


def shown_url(url: str) -> str:
    """``url`` without its credentials and query string (a key may sit in either)."""
    parts = urlsplit(_without_userinfo(url))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class HideUrlSecrets(logging.Filter):
    """Shows the URLs of a log record's arguments as :func:`shown_url` does.  httpx logs every
    request's full URL at INFO (seen with ``memstrata -v``): a key in the query string
    (``?key=``, ``?api-key=``) or in an upstream URL's ``user:password@`` must not reach the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(type(a).__name__ == "URL" for a in record.args):
            record.args = tuple(shown_url(str(a)) if type(a).__name__ == "URL" else a for a in record.args)
        return True


def hide_url_secrets(logger: logging.Logger) -> None:
    """Puts :class:`HideUrlSecrets` on ``logger`` (once)."""
    if not any(isinstance(f, HideUrlSecrets) for f in logger.filters):
        logger.addFilter(HideUrlSecrets())


@dataclass(frozen=True)
class Upstream:
    api: str          # openai | anthropic
    base_url: str     # e.g. https://api.openai.com/v1 or https://api.anthropic.com
    provider: str     # providers.json entry whose rates apply

    def url(self, rest: str, query: str = "") -> str:
        """``rest`` is the path after the proxy's prefix (/v1 or /anthropic).  A query string on
        the base URL (an Azure-style ``?api-version=...``) stays a query string, ahead of the
        request's own, as an SDK given that base URL and a default query sends it."""
        base, _, base_query = self.base_url.partition("?")
        url = base.rstrip("/") + "/" + rest.lstrip("/")
        query = "&".join(q for q in (base_query, query) if q)
        return f"{url}?{query}" if query else url


def request_headers(headers) -> list[tuple[str, str]]:
    """Client headers to send upstream: everything but per-hop ones (keys pass through, unlogged)."""
    return [(k, v) for k, v in headers.items() if k.lower() not in HOP_BY_HOP]


def response_headers(headers, decoded: bool = True) -> list[tuple[str, str]]:
    """The upstream's headers as relayed; its Content-Encoding only when the body is relayed
    still encoded (``decoded`` False: a coding httpx cannot undo)."""
    drop = RESPONSE_DROP if decoded else RESPONSE_DROP - {"content-encoding"}
    return [(k, v) for k, v in headers.multi_items() if k.lower() not in drop]


def _decodable() -> frozenset[str]:
    codings = {"identity", "gzip", "deflate"}
    for coding, module in (("br", "brotli"), ("br", "brotlicffi"), ("zstd", "zstandard")):
        if importlib.util.find_spec(module) is not None:
            codings.add(coding)
    return frozenset(codings)


_DECODABLE = _decodable()


def decoded_by_httpx(resp) -> bool:
    """Whether httpx undoes every coding of ``resp``'s body (it hands any other on as it came:
    a non-compliant upstream's `br` with no brotli installed)."""
    value = resp.headers.get("content-encoding", "")
    return all(c.strip().lower() in _DECODABLE for c in value.split(",") if c.strip())


_OPENAI_TYPES = {400: "invalid_request_error", 404: "not_found_error", 405: "invalid_request_error",
                 408: "invalid_request_error",
                 421: "invalid_request_error",
                 403: "permission_error", 413: "invalid_request_error", 414: "invalid_request_error",
                 415: "invalid_request_error", 431: "invalid_request_error", 502: "upstream_error",
                 504: "upstream_timeout", 500: "server_error"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 404: "not_found_error", 405: "invalid_request_error",
                    408: "timeout_error",
                    421: "invalid_request_error",
                    403: "permission_error", 413: "request_too_large", 414: "invalid_request_error",
                    415: "invalid_request_error", 431: "invalid_request_error", 502: "api_error", 504: "timeout_error",
                    500: "api_error"}


def error_body(api: str, status: int, message: str) -> dict:
    if api == ANTHROPIC:
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}
    return {"error": {"message": message, "type": _OPENAI_TYPES.get(status, "server_error"), "param": None,
                      "code": None}}


def sse_error_event(api: str, message: str) -> bytes:
    """An in-stream error event each SDK raises on (for failures after the headers went out)."""
    if api == ANTHROPIC:
        payload = json.dumps({"type": "error", "error": {"type": "api_error", "message": message}})
        return f"event: error\ndata: {payload}\n\n".encode()
    payload = json.dumps({"error": {"message": message, "type": "upstream_error", "param": None, "code": None}})
    return f"data: {payload}\n\n".encode()


def api_for_path(path: str) -> str:
    return ANTHROPIC if path.startswith("/anthropic") else OPENAI


__all__ = ["ANTHROPIC", "OPENAI", "UPSTREAM_KEEPALIVE_S", "Upstream", "error_body", "sse_error_event", "request_headers",
           "response_headers", "api_for_path", "DEFAULT_OPENAI_BASE", "DEFAULT_ANTHROPIC_BASE"]
