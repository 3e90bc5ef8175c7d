"""Anthropic's server-side context editing, as the counterfactual bill needs it.

A request may ask the provider to clear old tool results itself
(``context_management: {"edits": [{"type": "clear_tool_uses_20250919", ...}]}``,
beta ``context-management-2025-06-27``), or old thinking blocks
(``clear_thinking_20251015``).  The provider then bills, and caches, the prompt
*after* its clearing, so the bill the client would have had without the proxy
is the bill of the unmodified request after that clearing: a saving the
provider gives for free is not the proxy's.

The published rules, modelled here:

* tool result clearing acts only when the prompt exceeds its ``trigger``
  (default 100,000 input tokens; ``{"type": "tool_uses", "value": n}`` counts
  tool uses);
* it clears tool uses oldest first, all but the latest ``keep`` (default 3
  tool uses), never those of tools named in ``exclude_tools``: a cleared use's
  result becomes a short placeholder, its input too when
  ``clear_tool_inputs`` is true (or names its tool);
* when that would clear fewer than ``clear_at_least`` input tokens it clears
  nothing;
* thinking block clearing has no trigger: the thinking blocks of every
  assistant turn but the latest ``keep`` turns that hold thinking
  (``{"type": "thinking_turns", "value": n}``, default 1; ``"all"`` keeps
  every one) are removed.  A turn is the assistant's answer to one user
  message, tool use rounds included: it starts at a user message that is not
  only tool results.  Edits apply in the order listed (the thinking edit
  first, as the API asks), so the tool result trigger sees the prompt after
  the thinking is gone.

Limits: the placeholder's wording is not published (a short line is assumed);
the trigger and ``clear_at_least`` are compared with an estimate of the
provider's count (cl100k scaled as the provider's counts of earlier requests
say), so a prompt within the estimate's error of the trigger may fall on the
other side; a ``redacted_thinking`` block is cleared like a thinking block but
never counted (its text is not readable).  For the *forwarded* request the
provider says how many tool uses it cleared (``applied_edits``), and that
count is used instead of the model's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .analysis import _count, content_texts

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
DEFAULT_TRIGGER = 100_000
DEFAULT_KEEP = 3
DEFAULT_THINKING_TURNS = 1
THINKING = ("thinking", "redacted_thinking")
# What a cleared result reads: a short line (the provider's wording is not published).
PLACEHOLDER = "[tool result cleared]"


@dataclass(frozen=True)
class ClearToolUses:
    trigger_tool_uses: bool = False   # the trigger counts tool uses, not input tokens
    trigger: int = DEFAULT_TRIGGER
    keep: int = DEFAULT_KEEP
    clear_at_least: int = 0
    exclude_tools: frozenset = frozenset()
    clear_inputs: bool | frozenset = False   # True, or the tool names whose inputs are cleared


@dataclass(frozen=True)
class ClearThinking:
    keep: int | None = DEFAULT_THINKING_TURNS   # thinking turns kept, the latest; None: all


@dataclass(frozen=True)
class ContextEdits:
    """The request's edits the model knows, with the published defaults filled in."""
    thinking: ClearThinking | None = None
    tool_uses: ClearToolUses | None = None


def _value(spec, default: int) -> int:
    v = spec.get("value") if isinstance(spec, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else default


def _edit(body: dict, kind: str) -> dict | None:
    """The request's first ``context_management`` edit of type ``kind``, None without one."""
    config = body.get("context_management")
    edits = config.get("edits") if isinstance(config, dict) else None
    for edit in edits if isinstance(edits, list) else []:
        if isinstance(edit, dict) and edit.get("type") == kind:
            return edit
    return None


def clear_tool_uses(body: dict) -> ClearToolUses | None:
    """The request's tool result clearing edit with the published defaults filled in, None without one."""
    edit = _edit(body, CLEAR_TOOL_USES)
    if edit is None:
        return None
    trigger = edit.get("trigger")
    inputs = edit.get("clear_tool_inputs")
    return ClearToolUses(
        trigger_tool_uses=isinstance(trigger, dict) and trigger.get("type") == "tool_uses",
        trigger=_value(trigger, DEFAULT_TRIGGER),
        keep=_value(edit.get("keep"), DEFAULT_KEEP),
        clear_at_least=_value(edit.get("clear_at_least"), 0),
        exclude_tools=frozenset(t for t in edit.get("exclude_tools") or [] if isinstance(t, str)),
        clear_inputs=frozenset(t for t in inputs if isinstance(t, str)) if isinstance(inputs, list)
        else inputs is True)


def clear_thinking(body: dict) -> ClearThinking | None:
    """The request's thinking block clearing edit, None without one."""
    edit = _edit(body, CLEAR_THINKING)
    if edit is None:
        return None
    keep = edit.get("keep")
    if keep == "all" or (isinstance(keep, dict) and keep.get("type") == "all"):
        return ClearThinking(keep=None)
    return ClearThinking(keep=_value(keep, DEFAULT_THINKING_TURNS))


def context_edits(body: dict) -> ContextEdits | None:
    """The request's thinking and tool result clearing edits, None when it asks for neither."""
    thinking, tool_uses = clear_thinking(body), clear_tool_uses(body)
    return ContextEdits(thinking, tool_uses) if thinking or tool_uses else None


def thinking_cleared(body: dict, edit: ClearThinking) -> tuple[dict, int]:
    """``body`` without the thinking blocks of all but its latest ``keep`` thinking turns, and the
    cl100k tokens that removes.  The body is copied only where it changes."""
    messages = body.get("messages")
    if edit.keep is None or not isinstance(messages, list):
        return body, 0
    turn, turns = 0, []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        # a user message that is not only tool results starts a new turn (tool rounds continue one)
        if isinstance(m, dict) and m.get("role") == "user" and not (
                isinstance(content, list) and content
                and all(isinstance(p, dict) and p.get("type") == "tool_result" for p in content)):
            turn += 1
        turns.append(turn)
    thinking = [t for m, t in zip(messages, turns) if _holds_thinking(m)]
    kept = sorted(set(thinking))[-edit.keep:] if edit.keep else []
    drop = set(thinking) - set(kept)
    if not drop:
        return body, 0
    out, gone = list(messages), 0
    for i, (m, t) in enumerate(zip(messages, turns)):
        if t in drop and _holds_thinking(m):
            parts = [p for p in m["content"] if not (isinstance(p, dict) and p.get("type") in THINKING)]
            gone += sum(_tokens(p) for p in m["content"] if isinstance(p, dict) and p.get("type") in THINKING)
            out[i] = {**m, "content": parts}
    return {**body, "messages": out}, gone


def _holds_thinking(m) -> bool:
    return (isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), list)
            and any(isinstance(p, dict) and p.get("type") in THINKING for p in m["content"]))


def _tool_uses(body: dict) -> list[tuple[int, int, dict]]:
    """(message index, part index, tool_use block) of every tool use, oldest first."""
    out = []
    for i, m in enumerate(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), list):
            out.extend((i, j, p) for j, p in enumerate(m["content"])
                       if isinstance(p, dict) and p.get("type") == "tool_use")
    return out


def _tokens(part: dict) -> int:
    return sum(_count(t) for t in content_texts([part]))


def _clearable(body: dict, edit: ClearToolUses) -> list[tuple[int, int, dict]]:
    """The tool uses the edit may clear, oldest first: all but the latest ``keep``, none of an
    excluded tool."""
    uses = _tool_uses(body)
    return [u for u in uses[:max(len(uses) - edit.keep, 0)] if u[2].get("name") not in edit.exclude_tools]


def cleared(body: dict, edit: ClearToolUses, uses: int) -> tuple[dict, int]:
    """``body`` with its oldest ``uses`` clearable tool uses cleared, and the cl100k tokens that removes.
    The body is copied only where it changes."""
    candidates = _clearable(body, edit)[:uses]
    if not candidates:
        return body, 0
    ids = {u[2].get("id") for u in candidates}
    names = {u[2].get("id"): u[2].get("name") for u in candidates}
    placeholder = _count(PLACEHOLDER)
    messages = list(body["messages"])
    gone = 0
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("content"), list):
            continue
        parts, changed = list(m["content"]), False
        for j, p in enumerate(parts):
            if not isinstance(p, dict):
                continue
            if p.get("type") == "tool_result" and p.get("tool_use_id") in ids and p.get("content") != PLACEHOLDER:
                new = {**p, "content": PLACEHOLDER}
            elif (p.get("type") == "tool_use" and p.get("id") in ids and m.get("role") == "assistant"
                  and (edit.clear_inputs is True or (edit.clear_inputs and names[p.get("id")] in edit.clear_inputs))):
                new = {**p, "input": {}}
            else:
                continue
            gone += _tokens(p) - _tokens(new) if new.get("type") == "tool_use" else _tokens(p) - placeholder
            parts[j], changed = new, True
        if changed:
            messages[i] = {**m, "content": parts}
    return {**body, "messages": messages}, max(gone, 0)


def provider_view(body: dict, edits: ContextEdits | ClearToolUses, prompt_tokens: int, ratio: float = 1.0,
                  framing: float = 0.0) -> tuple[dict, int]:
    """The request as the provider bills it after its own clearing: (body, tool uses cleared).
    ``prompt_tokens`` is the request's cl100k count; the provider's count is estimated as that times
    ``ratio`` plus ``framing`` (what it adds around blocks), for the trigger and ``clear_at_least``."""
    if isinstance(edits, ClearToolUses):
        edits = ContextEdits(tool_uses=edits)
    if edits.thinking is not None:
        body, gone = thinking_cleared(body, edits.thinking)
        prompt_tokens -= gone
    edit = edits.tool_uses
    if edit is None:
        return body, 0
    if edit.trigger_tool_uses:
        if len(_tool_uses(body)) <= edit.trigger:
            return body, 0
    elif prompt_tokens * ratio + framing <= edit.trigger:
        return body, 0
    n = len(_clearable(body, edit))
    if n == 0:
        return body, 0
    out, gone = cleared(body, edit, n)
    if gone == 0 or gone * ratio < edit.clear_at_least:
        return body, 0
    return out, n
