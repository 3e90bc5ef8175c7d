"""Derived data saved to a file beside the store, to spare a process start-up
the work of building it again (the graph snapshot, the tokenizer's ranks).

The file is marshal data (plain lists, dicts, bytes: nothing executable)
behind a magic string naming its kind and a digest of the payload, written
with :func:`storage.files.atomic_write`, so a killed writer leaves the old
file or none, never half of one.  Anything unreadable
reads as "not there": the caller builds the data from its source.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
from pathlib import Path

from .files import atomic_write

log = logging.getLogger(__name__)

_DIGEST_BYTES = 16


def encode(name: str, magic: bytes, obj: object) -> bytes | None:
    """``obj`` as checked bytes (magic, digest, payload); None when marshal cannot hold it."""
    try:
        payload = marshal.dumps(obj)
    except ValueError as exc:  # a value marshal cannot hold
        log.info("%s not written: %s", name, exc)
        return None
    return magic + hashlib.blake2b(payload, digest_size=_DIGEST_BYTES).digest() + payload


def decode(name: str, magic: bytes, data: bytes) -> object | None:
    """What :func:`encode` made of an object; None when ``data`` is of another kind or damaged."""
    head = len(magic) + _DIGEST_BYTES
    if len(data) < head or not data.startswith(magic):
        return None
    payload = memoryview(data)[head:]
    if hashlib.blake2b(payload, digest_size=_DIGEST_BYTES).digest() != data[len(magic):head]:
        log.info("%s is damaged; building it again", name)
        return None
    try:
        return marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        log.info("%s is unreadable; building it again", name)
        return None


def write(path: Path, magic: bytes, obj: object) -> bool:
    """Save ``obj`` at ``path``; False (and nothing left behind) when it
    cannot be written, e.g. a full disk or a read-only folder."""
    data = encode(path.name, magic, obj)
    if data is None:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)
        return True
    except OSError as exc:
        log.info("%s not written: %s", path.name, exc.strerror or exc)
        return False


def read(path: Path, magic: bytes) -> object | None:
    """What :func:`write` saved at ``path`` under ``magic``; None when the
    file is missing, of another kind or damaged."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return decode(path.name, magic, data)
