"""Which HTTP requests a loopback service answers: the Host and Origin checks
shared by ``memstrata serve`` (harness/proxy/app.py) and the Kura daemon (kura/api.py).

A request must name a loopback Host (or one the user added, e.g. for a
non-loopback ``--host``): anything else is DNS rebinding, refused with 421.
When it carries an Origin, that must be an ``http(s)`` page on such a host:
any other is a cross-site request from a browser, refused with 403 —
``Origin: null`` (sandboxed frames, ``file:`` pages, some redirects)
included, as the MCP SDK's own transport security does.  Tools such as curl
and the SDKs send no Origin and are served.
"""

from __future__ import annotations

from collections.abc import Iterable

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
HOST = "host"
ORIGIN = "origin"


def host_name(value: str) -> str:
    """A Host header (or an Origin's netloc) without its port and IPv6 brackets, lower-cased.
    Whatever follows the name must be a port (`:8080`): `127.0.0.1:80@evil.example` names no
    loopback host, and is returned whole so that no allowed name matches it."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value
        name, rest = value[1:end], value[end + 1:]
    elif value.count(":") == 1:
        name, port = value.split(":", 1)
        rest = ":" + port
    else:
        name, rest = value, ""
    if rest and not (rest[0] == ":" and (rest[1:].isdigit() or rest == ":")):
        return value
    return name


def allowed_names(extra: Iterable[str] = ()) -> frozenset[str]:
    return LOOPBACK_NAMES | {host_name(h) for h in extra}


def refused(host: str | None, origin: str | None, allowed: frozenset[str] = LOOPBACK_NAMES) -> str | None:
    """``HOST`` or ``ORIGIN`` when that header makes the request foreign; None to serve it."""
    if host is None or host_name(host) not in allowed:
        return HOST
    if origin is not None:
        scheme, sep, netloc = origin.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or host_name(netloc) not in allowed:
            return ORIGIN
    return None


__all__ = ["LOOPBACK_NAMES", "HOST", "ORIGIN", "host_name", "allowed_names", "refused"]
