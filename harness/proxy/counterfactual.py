"""What the provider would have billed for the request the client sent, had the proxy not changed it.

``dollar_saved`` is that counterfactual bill minus what the provider reported
for the forwarded request.  The counterfactual needs the provider's prompt
cache as it would have been had every request gone out unmodified, so the
proxy keeps a *shadow* of it: digests of the cacheable prefixes of the
unmodified requests, with the time they expire.  Each request is then priced
by the provider's published caching rules:

* **Anthropic** (explicit breakpoints): a prefix is cached only up to a block
  marked ``cache_control`` (at most 4 per request; a top-level
  ``cache_control`` marks the last block).  At each breakpoint the provider
  looks for a cached prefix ending there or at one of the 20 block
  boundaries before it; the longest hit is read (0.1x), the rest up to the
  last breakpoint is written (1.25x), what follows is plain input.  Prefixes
  shorter than the model's minimum (1,024 tokens; 2,048 for Haiku 3/3.5;
  4,096 for Haiku 4.5 and Opus 4.5) are never cached.  An entry lives 5
  minutes, renewed by every hit -- or an hour, when its breakpoint is marked
  ``"ttl": "1h"``: then the writes up to the last such breakpoint after the
  hit are 1-hour writes (2x), the rest up to the last breakpoint 5-minute
  ones (Anthropic's "mixing TTLs" rule: positions A, B and C).
* **OpenAI** (automatic prefix caching, chat completions and responses):
  every prompt of 1,024 tokens or more is cached; a later prompt reads the
  longest prefix it shares with one cached, in 128-token steps from 1,024.
  No write charge.  Entries are kept 5 minutes after their last use.
* **none**: providers without a prompt cache bill everything as input.

Prefixes are compared block by block (a tool definition, a system part, a
content block of a message; on OpenAI a whole message), which is where
agent conversations diverge; on OpenAI also inside the message a prompt
diverges in, at marks about 120 tokens apart (see :func:`_checkpoints`).  Token counts are cl100k (:mod:`.analysis`);
the recorder scales the split to the provider's own count of the forwarded
request.  Known limits are in docs/proxy.md ("The counterfactual bill").
"""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from memstrata.compressor.tokens import count_tokens

from .analysis import _compact, _count, content_texts, message_texts, tool_definitions
from .conversation import message_key
from .memo import SizedLRU
from .request_blocks import ANTHROPIC, OPENAI, RESPONSES
from .responses_api import chat_view

ANTHROPIC_FAMILY = "anthropic"
OPENAI_FAMILY = "openai"
NO_CACHE = "none"

TTL_SECONDS = 300.0
ONE_HOUR_SECONDS = 3600.0   # a breakpoint marked "ttl": "1h"
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
OPENAI_MIN_TOKENS = 1024
OPENAI_STEP = 128
MAX_ENTRIES = 200_000


@dataclass(frozen=True)
class Split:
    """Prompt tokens of one request by how the provider bills them (cl100k)."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    blocks: int = 0   # prompt blocks (tool definitions, system parts, content blocks): the same sent or forwarded
    cache_write_1h: int = 0   # of cache_write, the tokens written to Anthropic's 1-hour cache

    @property
    def total(self) -> int:
        return self.input + self.cache_read + self.cache_write


@dataclass(frozen=True)
class PromptBlock:
    digest: bytes     # digest of the prompt up to and including this block
    tokens: int       # cl100k tokens up to and including this block
    marked: bool      # carries a cache_control breakpoint
    one_hour: bool = False   # ... marked "ttl": "1h": its entry lives an hour, written at the 1-hour rate


def cache_family(api: str, provider: str | None) -> str:
    """Whose caching rules apply: Anthropic's endpoint, OpenAI's own service, or none."""
    if api == ANTHROPIC:
        return ANTHROPIC_FAMILY
    if provider in (None, "openai", "azure", "azure-openai"):
        return OPENAI_FAMILY
    return NO_CACHE


def anthropic_min_tokens(model: str | None) -> int:
    m = (model or "").lower()
    if "haiku-4-5" in m or "opus-4-5" in m:
        return 4096
    if "haiku" in m:
        return 2048
    return 1024


def prompt_blocks(body: dict, api: str, model: str | None = None) -> list[PromptBlock]:
    """The request's prompt as the provider's cache sees it: blocks in prompt order, each with the
    digest and token count of the prefix ending there.  The last block's count is the request's
    :func:`.analysis.prompt_tokens` (outside the Responses API, whose blocks pair items with messages)."""
    out: list[PromptBlock] = []
    h = _seed(api, model)
    total = 0
    for key, tokens, mark in _keyed_blocks(body, api):
        total += tokens
        h = hashlib.blake2b(h + key, digest_size=16).digest()
        out.append(PromptBlock(h, total, mark is not None, mark == ONE_HOUR))
    if api == ANTHROPIC and isinstance(body.get("cache_control"), dict) and out:
        out[-1] = PromptBlock(out[-1].digest, out[-1].tokens, True, _lifetime(body["cache_control"]) == ONE_HOUR)
    return out


def _seed(api: str, model: str | None) -> bytes:
    """The digest every prefix chain of ``api`` and ``model`` starts from."""
    return hashlib.blake2b(f"{api}\0{model or ''}".encode(), digest_size=16).digest()


def _block_texts(body: dict, api: str) -> list[list[str] | None]:
    """Each block's texts, in :func:`prompt_blocks`'s order; None for a tool definition (remembered
    as a block of its own, and never where a prompt diverges inside a block)."""
    if _tools_remembered(body, api):
        return [None] * len(body["tools"]) + [texts for _, texts, _ in _raw_blocks(body, api, tools=False)]
    return [texts for _, texts, _ in _raw_blocks(body, api)]


# OpenAI shares a prefix inside a message too: a new conversation that pastes the same file with
# another question, or a message edited at its end, reads the cached part of the message it
# diverges in.  The shadow marks each new message's text every CHECKPOINT_CHARS characters or so,
# at the next line break (~120 tokens: within one of OpenAI's 128-token steps), by a digest
# chained on the prefix before the message; the longest live mark gives the tokens shared.
CHECKPOINT_CHARS = 512


def _checkpoints(seed: bytes, texts: list[str]) -> list[tuple[bytes, int, int]]:
    """(digest of the block's texts up to here, chained on ``seed``; the text's index; the offset
    in it, just after a line break), in order along the block."""
    h = hashlib.blake2b(seed, digest_size=16)
    out: list[tuple[bytes, int, int]] = []
    for i, text in enumerate(texts):
        h.update(b"\0")  # a text's end is no part of the next text
        done = 0
        while True:
            cut = text.find("\n", done + CHECKPOINT_CHARS - 1)
            if cut < 0:
                break
            h.update(text[done : cut + 1].encode("utf-8", "surrogatepass"))
            done = cut + 1
            out.append((h.copy().digest(), i, done))
        h.update(text[done:].encode("utf-8", "surrogatepass"))
    return out


def _keyed_blocks(body: dict, api: str) -> Iterator[tuple[bytes, int, str | None]]:
    """(the block's digest, markers left out; the tokens of its texts; its mark, see :func:`_mark`),
    block by block."""
    if _tools_remembered(body, api):
        for tool in body["tools"]:
            key, tokens = _tool_block(tool, api)
            yield key, tokens, _mark(tool)
        blocks = _raw_blocks(body, api, tools=False)
    else:
        blocks = _raw_blocks(body, api)
    for key, texts, marked in blocks:
        yield message_key(list(key)), sum(_count(t) for t in texts), marked


def _tools_remembered(body: dict, api: str) -> bool:
    """Whether every tool is a block of its own, the same in every request of every conversation:
    remembered, they are not written out as JSON and counted again on each request."""
    return api != RESPONSES and _plain_tools(body, api)


def _plain_tools(body: dict, api: str) -> bool:
    """Whether the tool definitions are ``body["tools"]``, one block each in order (no None among
    them, which :func:`.analysis.tool_definitions` skips, and no legacy OpenAI ``functions``)."""
    tools = body.get("tools")
    return (isinstance(tools, list) and all(t is not None for t in tools)
            and not (api == OPENAI and isinstance(body.get("functions"), list)))


# A tool definition's block digest and token count, by the definition's exact value: its pickle
# (which tells 1, 1.0 and True apart and keeps key order, as the digest does, and keeps the
# cache_control marker the counted text keeps), and whether its OpenAI text (its "function") is
# the one counted.  Pickling a definition costs a fifth of freezing it (see .conversation).
MAX_TOOL_ENTRIES = 1024
MAX_TOOL_BYTES = 4_000_000
_tool_memo = SizedLRU(MAX_TOOL_ENTRIES, MAX_TOOL_BYTES)   # -> (block digest, tokens)


def _tool_block(tool, api: str) -> tuple[bytes, int]:
    memo_key = None
    if type(tool) is dict:
        try:
            memo_key = (api == OPENAI, pickle.dumps(tool, protocol=4))
        except Exception:   # not a JSON value: computed, not remembered
            memo_key = None
    if memo_key is not None:
        hit = _tool_memo.get(memo_key)
        if hit is not None:
            return hit
    fn = tool.get("function") if api == OPENAI and isinstance(tool, dict) else None
    text = _compact(fn) if isinstance(fn, dict) else _compact(tool)   # as tool_definitions writes it
    entry = (message_key(["tool", tool]), _count(text))
    if memo_key is not None:
        _tool_memo.put(memo_key, entry, len(memo_key[1]))
    return entry


def _raw_blocks(body: dict, api: str, tools: bool = True) -> Iterator[tuple[object, list[str], str | None]]:
    """(what identifies the block, its texts, its mark) in the order the provider caches them.
    The texts are exactly :func:`.analysis.prompt_texts`'s, so the blocks sum to the request's count."""
    if api == RESPONSES:
        if body.get("instructions") is not None:
            yield ("instructions", body["instructions"]), list(content_texts(body["instructions"])), None
        for tool, text in zip(_tools(body), tool_definitions(body, api)):
            yield ("tool", tool), [text], None
        view = chat_view(body)
        for item, msg in zip(_items(body), view["messages"] if view else []):
            yield ("item", item), list(message_texts(msg, OPENAI)), None
        return
    if tools:
        tools = _tools(body)
        definitions = list(tool_definitions(body, api))
        for k, text in enumerate(definitions):
            tool = tools[k] if k < len(tools) else ("function", k)
            yield ("tool", tool), [text], _mark(tool)
    if api == ANTHROPIC:
        system = body.get("system")
        if isinstance(system, list):
            for part in system:
                yield ("system", part), list(content_texts([part])), _mark(part)
        elif system is not None:
            yield ("system", system), list(content_texts(system)), None
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            yield ("message", m), [], None
        elif api == ANTHROPIC and isinstance(m.get("content"), list):
            role = m.get("role")
            for part in m["content"]:
                yield ("part", role, part), list(content_texts([part])), _mark(part)
        else:
            yield ("message", m), list(message_texts(m, api)), _mark(m)


def _tools(body: dict) -> list:
    tools = body.get("tools")
    return list(tools) if isinstance(tools, list) else []


def _items(body: dict) -> list:
    """The input items as :func:`.responses_api.chat_view` reads them: a string is one user message,
    any other value that is no list (a request the provider refuses) none."""
    items = body.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return list(items) if isinstance(items, list) else []


FIVE_MINUTES, ONE_HOUR = "5m", "1h"


def _lifetime(control) -> str:
    """The lifetime a ``cache_control`` value asks for: Anthropic's ``"ttl": "1h"``, else its default 5m."""
    return ONE_HOUR if isinstance(control, dict) and control.get("ttl") == ONE_HOUR else FIVE_MINUTES


def _mark(part) -> str | None:
    """The lifetime of the breakpoint ``part`` carries (its own ``cache_control``, else that of the last
    block inside it that has one, nearest the prefix's end), None when it carries none."""
    if not isinstance(part, dict):
        return None
    if "cache_control" in part:
        return _lifetime(part["cache_control"])
    inner = part.get("content")
    marks = [x["cache_control"] for x in inner if isinstance(x, dict) and "cache_control" in x] \
        if isinstance(inner, list) else []
    return _lifetime(marks[-1]) if marks else None


class ShadowCache:
    """The provider's prompt cache as the unmodified requests would have left it.

    Keyed by prefix digest (which already names the API and model), like the
    provider's own cache: conversations that share a system prompt and tools
    share those entries.  Bounded to ``max_entries``, least recently used out.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES, ttl: float = TTL_SECONDS,
                 long_ttl: float = ONE_HOUR_SECONDS):
        # digest -> (expires at, lifetime): a hit renews an entry for the lifetime it was written with
        self._entries: OrderedDict[bytes, tuple[float, float]] = OrderedDict()
        # an OpenAI prefix's digest -> the marks inside its last message (see _checkpoints): they live
        # as long as the prefix does, renewed with it
        self._inside: OrderedDict[bytes, tuple[bytes, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.ttl = ttl
        self.long_ttl = long_ttl

    def bill(self, body: dict, api: str, family: str, model: str | None, now: float,
             blocks: list[PromptBlock] | None = None) -> Split:
        """Price ``body`` (the request as the client sent it) and remember what it leaves cached;
        ``blocks``: its :func:`prompt_blocks`, when the caller has them already."""
        if blocks is None:
            blocks = prompt_blocks(body, api, model)
        total = blocks[-1].tokens if blocks else 0
        if family == NO_CACHE or not blocks:
            return Split(input=total, blocks=len(blocks))
        with self._lock:
            if family == ANTHROPIC_FAMILY:
                split = self._anthropic(blocks, total, anthropic_min_tokens(model), now)
            else:
                split = self._openai(blocks, total, now, body, api, model)
        return Split(split.input, split.cache_read, split.cache_write, len(blocks), split.cache_write_1h)

    def _live(self, digest: bytes, now: float) -> bool:
        entry = self._entries.get(digest)
        return entry is not None and entry[0] > now

    def _put(self, digest: bytes, now: float, lifetime: float | None = None) -> None:
        if lifetime is None:
            lifetime = self.ttl
        self._entries[digest] = (now + lifetime, lifetime)
        self._entries.move_to_end(digest)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def _anthropic(self, blocks: list[PromptBlock], total: int, minimum: int, now: float) -> Split:
        breakpoints = [i for i, b in enumerate(blocks) if b.marked][:MAX_BREAKPOINTS]
        if not breakpoints:
            return Split(input=total)
        hit = -1
        for bp in breakpoints:
            for i in range(bp, max(bp - LOOKBACK_BLOCKS, 0) - 1, -1):
                if i <= hit:
                    break
                if self._live(blocks[i].digest, now):
                    hit = i
                    break
        read = blocks[hit].tokens if hit >= 0 else 0
        if hit >= 0:
            digest = blocks[hit].digest
            self._put(digest, now, self._entries[digest][1])  # a hit renews the entry's own lifetime
        last = breakpoints[-1]
        write = write_1h = 0
        if last > hit and blocks[last].tokens >= minimum:
            # Anthropic's rule for mixed lifetimes: A the hit (read), B the last 1-hour breakpoint after
            # it (A to B written at the 1-hour rate), C the last breakpoint (B to C at the 5-minute
            # rate).  A 1-hour breakpoint under the minimum caches nothing, so it is no B.
            written = [bp for bp in breakpoints if bp > hit and blocks[bp].tokens >= minimum]
            write = blocks[last].tokens - read
            long = [bp for bp in written if blocks[bp].one_hour]
            write_1h = blocks[long[-1]].tokens - read if long else 0
            for bp in written:
                self._put(blocks[bp].digest, now, self.long_ttl if blocks[bp].one_hour else self.ttl)
        return Split(input=total - read - write, cache_read=read, cache_write=write, cache_write_1h=write_1h)

    def _openai(self, blocks: list[PromptBlock], total: int, now: float, body: dict, api: str,
                model: str | None) -> Split:
        hit = next((i for i in range(len(blocks) - 1, -1, -1) if self._live(blocks[i].digest, now)), -1)
        shared = blocks[hit].tokens if hit >= 0 else 0
        if total < OPENAI_MIN_TOKENS:
            return Split(input=total)   # too short to be cached, or to read a cached prefix
        new = range(hit + 1, len(blocks))
        texts = _block_texts(body, api) if new else []
        if len(texts) != len(blocks):
            texts = [None] * len(blocks)   # a shape the two walks read differently: whole blocks only
        marks: dict[int, list[tuple[bytes, int, int]]] = {}
        for i in new:
            if texts[i]:
                marks[i] = _checkpoints(blocks[i - 1].digest if i else _seed(api, model), texts[i])
        if hit + 1 in marks:
            # the message the prompt diverges in: up to its last mark a cached prompt holds too
            live = None
            for mark in marks[hit + 1]:
                if not self._live(mark[0], now):
                    break
                live = mark
            if live is not None:
                _, t, offset = live
                block = texts[hit + 1]
                shared += sum(_count(x) for x in block[:t]) + count_tokens(block[t][:offset])
        read = shared // OPENAI_STEP * OPENAI_STEP if shared >= OPENAI_MIN_TOKENS else 0
        for i, b in enumerate(blocks):
            self._put(b.digest, now)
            if i in marks:
                self._inside[b.digest] = tuple(m[0] for m in marks[i])
                self._inside.move_to_end(b.digest)
            for digest in self._inside.get(b.digest, ()):
                self._put(digest, now)
        while len(self._inside) > self.max_entries:
            self._inside.popitem(last=False)
        return Split(input=total - read, cache_read=read)


# OpenAI's published way of counting a chat prompt: each message costs 3 tokens of framing (role and
# separators) beyond its text, and the reply is primed with 3 more.  Framing is the same for the
# request as sent and as forwarded (the proxy never adds or drops a message), so it is not scaled.
OPENAI_FRAMING_PER_MESSAGE = 3
OPENAI_FRAMING_REPLY = 3


def framing_tokens(body: dict, api: str, family: str) -> int:
    """Tokens the provider adds around the request's texts, where its rules say how many (OpenAI)."""
    if family != OPENAI_FAMILY:
        return 0
    if api == RESPONSES:
        view = chat_view(body)
        n = len(view["messages"]) if view else 0
    else:
        n = sum(1 for m in body.get("messages") or [] if isinstance(m, dict))
    return OPENAI_FRAMING_PER_MESSAGE * n + OPENAI_FRAMING_REPLY


class FramingEstimate:
    """Tokens a provider adds to each prompt block beyond the block's text, learnt from its own reports.

    A provider counts a request as its texts in its own tokenizer plus framing
    around every block (role markers, separators, tool-use ids and wrappers).
    The proxy changes texts, never blocks, so the framing is the same in the
    request as sent and as forwarded; scaling it with the texts' ratio would
    inflate the counterfactual by the compression ratio times the framing --
    small against the bill, but not against a saving that is mostly cheap
    cache reads.  Where the provider publishes its framing (OpenAI) that is
    used; elsewhere it is fitted: the reported prompt totals of a model's
    requests against (our count of the forwarded texts, their blocks), least
    squares over recent requests (older ones fade out), the per-block share
    kept within ``[0, max_per_block]``.  Until the fit is determined (one
    request, or requests whose texts grew in step with their blocks) the
    framing is taken as 0 and everything scales, as before.
    """

    def __init__(self, decay: float = 0.98, max_per_block: float = 32.0):
        self.decay = decay
        self.max_per_block = max_per_block
        self._sums: dict[object, list[float]] = {}   # key -> [T*T, T*B, B*B, R*T, R*B]
        self._lock = threading.Lock()

    def observe(self, key: object, text_tokens: int, blocks: int, reported: int) -> None:
        if text_tokens <= 0 or blocks <= 0 or reported <= 0:
            return
        t, b, r = float(text_tokens), float(blocks), float(reported)
        with self._lock:
            s = self._sums.setdefault(key, [0.0] * 5)
            for i, v in enumerate((t * t, t * b, b * b, r * t, r * b)):
                s[i] = s[i] * self.decay + v

    def per_block(self, key: object) -> float:
        with self._lock:
            s = self._sums.get(key)
            if s is None:
                return 0.0
            tt, tb, bb, rt, rb = s
        det = tt * bb - tb * tb
        # Nearly collinear texts and blocks leave the split undetermined: assume no framing.
        if det <= 1e-6 * tt * bb:
            return 0.0
        f = (tt * rb - tb * rt) / det
        return min(max(f, 0.0), self.max_per_block)


# Parts of a prompt the provider bills by their own rules (an image by its pixels, a PDF by its
# pages, audio by its length), which no text count sees and the proxy never changes.
_UNCOUNTED_PARTS = frozenset({"image", "image_url", "input_image", "document", "file", "input_file",
                              "input_audio", "audio"})


def has_uncounted_parts(body: dict, api: str) -> bool:
    """Whether the request holds an image, a file or audio: billed by the provider beside its
    texts, the same sent or forwarded."""
    messages = body.get("input") if api == RESPONSES else body.get("messages")
    stack = list(messages) if isinstance(messages, list) else []
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            kind = item.get("type")
            if kind in _UNCOUNTED_PARTS and not (kind == "document" and _text_document(item)):
                return True
            for key in ("content", "output"):
                value = item.get(key)
                if isinstance(value, list):
                    stack.extend(value)
    return False


def _text_document(part: dict) -> bool:
    source = part.get("source")
    return isinstance(source, dict) and source.get("type") in ("text", "content")


class TextRatio:
    """The provider's tokens per cl100k token of a request's texts, per model, learnt from the
    requests that hold texts only (recent ones weigh more).  A request with an image is billed
    for the image too: its reported total over our count of its texts would scale the removed
    code by the image's tokens as well.

    The framing the provider adds per block is in its reported total too, and where it is fitted
    (:class:`FramingEstimate`) it is not known when the first requests are seen: one request
    cannot tell its texts from its framing.  So each request is remembered as its reported total
    and its blocks, both per token of its texts, and the framing is taken out when the ratio is
    read, at the per-block share known *then*.  (Taken out when each request was seen, the first
    ones' framing stayed in the ratio: a first request of 900 tokens in 5 blocks of 3 tokens of
    framing each put it 1.7 % high, still 0.7 % eight requests later -- enough to put a prompt 100
    tokens under a 100,000-token clearing trigger over it.)
    """

    def __init__(self, weight: float = 0.1):
        self.weight = weight
        self._ratios: dict[object, tuple[float, float]] = {}   # key -> (reported / texts, blocks / texts)
        self._lock = threading.Lock()

    def observe(self, key: object, text_tokens: int, reported_texts: int, blocks: int = 0) -> None:
        """``reported_texts``: the provider's count less the framing its rules publish (none where it
        is fitted); ``blocks``: the blocks of the fitted framing (0 where it is published)."""
        if text_tokens <= 0 or reported_texts <= 0:
            return
        r, b = reported_texts / text_tokens, blocks / text_tokens
        with self._lock:
            old = self._ratios.get(key)
            self._ratios[key] = (r, b) if old is None else (old[0] + self.weight * (r - old[0]),
                                                             old[1] + self.weight * (b - old[1]))

    def get(self, key: object, per_block: float = 0.0) -> float | None:
        """The ratio with ``per_block`` tokens of framing per block taken out of every request seen."""
        with self._lock:
            got = self._ratios.get(key)
        ratio = None if got is None else got[0] - per_block * got[1]
        return ratio if ratio is not None and ratio > 0 else None


def scaled(split: Split, reported_total: int | None, forwarded_tokens: int,
           framing: int = 0, text_ratio: float | None = None) -> tuple[int, int, int, int] | None:
    """``split`` in the provider's tokens: its texts scaled by the provider's count of the forwarded
    request's texts over ours (the provider's count less ``framing``), plus that framing.  With
    ``text_ratio`` (a request that also holds images or files, billed apart), the texts the proxy
    removed are added to the provider's count at that ratio, and nothing else is scaled.
    Returns (input, cache read, cache write, of those writes the 1-hour ones); None when the provider
    reported no usage (nothing to scale by)."""
    if reported_total is None or forwarded_tokens <= 0:
        return None
    framing = min(framing, reported_total)
    if text_ratio is not None:
        r = text_ratio
        total = reported_total + round((split.total - forwarded_tokens) * r)
    else:
        r = (reported_total - framing) / forwarded_tokens
        total = round(split.total * r) + framing
    k = total / split.total if split.total else r
    read, write = round(split.cache_read * k), round(split.cache_write * k)
    return total - read - write, read, write, min(round(split.cache_write_1h * k), write)
