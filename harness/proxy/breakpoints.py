"""The proxy's own prompt-cache breakpoints: the starts of the latest tasks.

A client such as Claude Code marks its system prompt and the last block of
the last message.  Under Anthropic's rules a prefix is read back only up to a
marked block (or one of the 20 blocks before it), so when a compaction step
compresses an earlier task's tool results, everything after the system prompt
is written again at the cache-write price.  Marking where the latest tasks
start -- the user's own words opening each -- gives those steps a cached
prefix to stand on: compressing the task before the current one re-bills
that task alone.  A mark adds no tokens and no write charge of its own (the
tokens up to the last breakpoint are written once, whichever breakpoints
divide them), and the cache ignores where marks sit when it compares
prefixes; so the proxy marks only before the client's last breakpoint (what
follows it is billed as plain input, which a mark would turn into cache
writes).  Anthropic refuses a request with more than four, so the proxy
uses only the slots the client left free, and none where the client does
not cache at all.
"""

from __future__ import annotations

MAX_BREAKPOINTS = 4     # Anthropic refuses a request with more cache_control blocks
TASK_MARKS = 2          # the current task's start and the one before it


def client_breakpoints(body: dict) -> list[dict]:
    """The ``cache_control`` values the client put in ``body``, in the order the cache reads them."""
    found: list[dict] = []

    def scan(parts) -> None:
        if not isinstance(parts, list):
            return
        for part in parts:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("cache_control"), dict):
                found.append(part["cache_control"])
            inner = part.get("content")
            if isinstance(inner, list):
                found.extend(x["cache_control"] for x in inner
                             if isinstance(x, dict) and isinstance(x.get("cache_control"), dict))

    scan(body.get("tools"))
    scan(body.get("system"))
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            scan(m.get("content"))
    if isinstance(body.get("cache_control"), dict):   # automatic caching: a mark on the last block
        found.append(body["cache_control"])
    return found


def free_marks(body: dict) -> int:
    """How many task starts the proxy may mark in an Anthropic ``body``: none unless the client caches."""
    marks = client_breakpoints(body)
    if not marks:
        return 0
    return max(0, min(TASK_MARKS, MAX_BREAKPOINTS - len(marks)))


def last_marked_message(body: dict) -> int:
    """The index of the last message the client marks (the last message under a top-level automatic
    mark), -1 when it marks none (its system prompt or tools at most).  The proxy marks only messages
    before it: tokens after the client's last breakpoint are billed as plain input, and a mark
    there would have them written to the cache at the write price instead."""
    msgs = body.get("messages") or []
    if isinstance(body.get("cache_control"), dict):
        return len(msgs) - 1
    for i in range(len(msgs) - 1, -1, -1):
        if isinstance(msgs[i], dict) and client_breakpoints({"messages": [msgs[i]]}):
            return i
    return -1


def task_marks(records, n: int, before: int | None = None) -> set[int]:
    """Indexes of the records the proxy marks: the latest ``n`` task starts (a user message with the
    user's own words) before record ``before`` (the client's last marked message; None: any),
    once there is an earlier task whose results a step could compress."""
    if n <= 0:
        return set()
    starts = [i for i, r in enumerate(records) if r.real_user]
    if len(starts) < 2:
        return set()
    return {i for i in starts[-n:] if before is None or i < before}


def with_mark(msg: dict, control: dict) -> dict | None:
    """``msg`` with ``control`` on its last content block; None when it has no block to carry it, or
    carries a mark already."""
    content = msg.get("content")
    if isinstance(content, str):
        if not content:
            return None
        return {**msg, "content": [{"type": "text", "text": content, "cache_control": dict(control)}]}
    if not isinstance(content, list) or not content or not isinstance(content[-1], dict):
        return None
    if any(isinstance(p, dict) and "cache_control" in p for p in content):
        return None
    last = content[-1]
    if last.get("type") in ("thinking", "redacted_thinking"):   # blocks the API takes no mark on
        return None
    return {**msg, "content": [*content[:-1], {**last, "cache_control": dict(control)}]}


def mark_control(body: dict, index: int) -> dict:
    """The ``cache_control`` a proxy mark on message ``index`` carries: that of the client's next mark
    after it (a request's cache lifetimes may only shorten along the prompt), else of its last one."""
    msgs = body.get("messages") or []
    later = client_breakpoints({"messages": msgs[index + 1:], "cache_control": body.get("cache_control")})
    if later:
        return dict(later[0])
    marks = client_breakpoints(body)
    return dict(marks[-1]) if marks else {"type": "ephemeral"}
