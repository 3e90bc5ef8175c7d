"""Request bodies a client sent compressed (``Content-Encoding: gzip``, ``deflate``, ``zstd``).

A client may compress what it uploads (Codex CLI compresses its Responses
requests with zstd).  The proxy reads a model call as JSON, so it decodes the
body first and forwards it decoded: the upstream then sees a plain request,
which every provider accepts.  Decoding stops as soon as the output passes the
proxy's body limit, so a small compressed body cannot expand into gigabytes.
"""

from __future__ import annotations

import zlib

SUPPORTED = ("gzip", "deflate", "zstd")
_CHUNK = 1 << 20


class UnsupportedEncoding(Exception):
    """A content coding the proxy cannot decode (``br``, ``compress``, a typo)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class DecodedTooLarge(Exception):
    """The decoded body passes the proxy's limit."""


class BadEncoding(Exception):
    """The bytes are not what their ``Content-Encoding`` says."""


def codings(header: str) -> list[str]:
    """The codings of a ``Content-Encoding`` header in the order they were applied, ``identity``
    left out (``gzip, identity`` is just gzip)."""
    return [c for c in (part.strip().lower() for part in header.split(",")) if c and c != "identity"]


def decode_body(data: bytes, header: str, limit: int) -> bytes:
    """``data`` with every coding of ``header`` undone, last applied first."""
    for coding in reversed(codings(header)):
        if coding in ("gzip", "x-gzip"):
            data = _zlib(data, zlib.MAX_WBITS | 16, limit, coding)
        elif coding == "deflate":
            # RFC 9110's deflate is the zlib format; some clients send raw deflate instead.
            try:
                data = _zlib(data, zlib.MAX_WBITS, limit, coding)
            except BadEncoding:
                data = _zlib(data, -zlib.MAX_WBITS, limit, coding)
        elif coding == "zstd":
            data = _zstd(data, limit)
        else:
            raise UnsupportedEncoding(coding)
    return data


def _zlib(data: bytes, wbits: int, limit: int, coding: str) -> bytes:
    d = zlib.decompressobj(wbits)
    out: list[bytes] = []
    size = 0
    try:
        pending = data
        while pending:
            chunk = d.decompress(pending, _CHUNK)
            size += len(chunk)
            if size > limit:
                raise DecodedTooLarge
            out.append(chunk)
            pending = d.unconsumed_tail
            if d.eof:
                break
        if not d.eof:
            raise BadEncoding(f"the {coding} data ends early")
    except zlib.error as exc:
        raise BadEncoding(f"not valid {coding} data") from exc
    return b"".join(out)


def _zstd(data: bytes, limit: int) -> bytes:
    import zstandard  # imported on first use: most clients never send zstd

    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    out: list[bytes] = []
    size = 0
    try:
        while True:
            chunk = reader.read(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise DecodedTooLarge
            out.append(chunk)
    except zstandard.ZstdError as exc:
        raise BadEncoding("not valid zstd data") from exc
    return b"".join(out)
