"""What `memstrata serve` forwards: each request's code compressed inside its own blocks,
earlier turns forwarded exactly as before.

The rules (docs/proxy.md, "Compression"):

1. Compression works inside each pasted block and each tool result
   (:mod:`.request_blocks` finds them, :mod:`compressor.block` cuts
   them): the definitions the question points at stay verbatim and whole,
   with their class frames and the imports they use; every other run of
   lines becomes one marker line naming the path and line range.  Nothing
   from other files is put in.
2. Blocks under ``min_tokens`` and single definitions are never cut (a numbered read still
   goes without its line numbers' padding, :mod:`.gutter`); aggressive mode's compaction of an
   earlier task's results is the exception to the first (``earlier_min_tokens``).
3. In agent conversations the unit is the tool result: the latest
   ``keep_tool_uses`` results (until the next task's first tool call) and
   the current task's latest ``keep_task_tool_uses`` stay whole (one over
   ``result_cap``, or ``likely_cap`` from a file the question is probably
   about, is cut around what the task points at); older ones (an
   earlier task's, small) are compressed at compaction steps
   that pay under the provider's cache prices; a file read again turns one
   copy into a pointer to the other.  The question is the latest real user
   text, harness boilerplate removed (of a long one, its opening and its
   end), else the task's first message.
4. Once a message was forwarded in some form, later requests forward it in
   that form, byte for byte (:mod:`.conversation`); forms change only
   at rare compaction steps (:mod:`.compaction`).  The client's
   ``cache_control`` markers stay where it put them; where it caches and
   left slots free, the proxy marks the latest two task starts
   (:mod:`.breakpoints`), so a step compacting an earlier task keeps the
   provider's cache of what precedes it.
5. Tests stay out unless the question is about tests or the block is one.
7. ``mode``: ``safe`` (default), ``aggressive`` (cuts the current turn's results
   to a far smaller limit, keeps only what is named of earlier tasks' results of
   any size, compacts sooner), ``off``.

:class:`CompressionResult` carries what the ledger needs to count
honestly (rule 6): the mode, the conversation, whether this request is a
compaction step and how many previously forwarded tokens it makes the
provider re-read uncached.  ``body`` is None when the request is forwarded
unchanged.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field

from memstrata.compressor.block import BlockSettings
from memstrata.storage import StoreError

from .breakpoints import free_marks, last_marked_message, mark_control, task_marks, with_mark
from .compaction import (
    SAFE_RESULT_CAP, PlanCache, RequestPass, TokenCache, cache_economics, forwarded_message, set_path,
)
from .conversation import ConversationStore, Record, as_of, conversation_id, message_key
from .memo import SizedLRU
from .project_match import ProjectMatcher
from .request_blocks import ANTHROPIC, MODES, OPENAI, RESPONSES
from .responses_api import apply_view, chat_view

__all__ = ["AGGRESSIVE_RESULT_CAP", "ANTHROPIC", "OPENAI", "RESPONSES", "MODES", "CompressionResult",
           "CompressionSettings", "Compressor", "ProjectMatcher", "set_path"]


# System prompts and tool definitions whose token count is remembered (by their pickles).
MAX_BASE_ENTRIES = 256
MAX_BASE_BYTES = 8_000_000


@dataclass(frozen=True)
class CompressionSettings:
    mode: str = "safe"
    min_tokens: int = 1500          # rule 2: blocks under this are never cut
    paste_cap: int = 10_000         # a pasted block over this is compressed when it arrives (oversized)
    result_cap: int = SAFE_RESULT_CAP  # a newer tool result over this (16,000) is cut down to about this size
    budget_ratio: float = 0.5       # definitions that rank (beyond the named ones) may fill this share of a block
    budget_cap: int = 6000          # ... and at most this many tokens of it
    rel_score: float = 0.1          # ranked definitions need this share of the best score
    earlier_ratio: float = 0.15     # an earlier task's results: ranked definitions fill this share ...
    earlier_cap: int = 1500         # ... and at most this many tokens
    keep_tool_uses: int = 3         # the latest tool results, kept whole
    keep_task_tool_uses: int = 10   # ... and the current task's latest ones (since the user's latest words)
    trigger: int = 24_000           # compaction is considered once the forwarded request reaches this
    clear_at_least: int = 6_000     # a compaction step clears at least this many tokens ...
    horizon_share: float = 0.5      # a step must pay back within this share of the turns so far ...
    horizon: int = 20               # ... and within this many more turns
    min_run_lines: int = 4          # unfenced pasted project code needs this many lines
    likely_file: float = 0.3        # a new result whose file the question names, or the project ranking gives
    #                                 this chance of holding what it needs (0: no result is so treated), ...
    likely_cap: int = 32_000        # ... is cut only past this size
    unpad_gutter: bool = True       # numbered reads go without the padding before their line numbers
    hold_returned_reads: bool = True  # an earlier task's read of a file the agent keeps re-reading stays
    #                                   whole for the next re-read to point into (see _AGGRESSIVE)
    compact_pointers: bool = False  # an earlier task's re-read forwarded as pointers is compacted too
    earlier_min_tokens: int | None = None  # an earlier task's result under this stays whole at compaction
    #                                        (None: ``min_tokens``; see _AGGRESSIVE)
    earlier_text: int = 0           # an earlier task's own user text over this many tokens keeps only its
    #                                 opening and end at compaction (0: never; see _AGGRESSIVE)
    defer_task_start: bool = False  # no compaction step at a new task's words while the task just ended
    #                                 still holds its results (see _AGGRESSIVE)

    @classmethod
    def for_mode(cls, mode: str = "safe", **overrides) -> "CompressionSettings":
        """The defaults of ``mode``, with any override that is not None."""
        if mode not in MODES:
            raise ValueError(f"unknown compression mode {mode!r} (choose {', '.join(MODES)})")
        base = dict(_AGGRESSIVE) if mode == "aggressive" else {}
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(mode=mode, **base)

    def block_settings(self) -> BlockSettings:
        return BlockSettings(min_tokens=self.min_tokens, ranked_share=self.budget_ratio,
                             ranked_cap=self.budget_cap, rel_score=self.rel_score,
                             min_ranked=2 if self.mode == "aggressive" else 5)


# Aggressive: every paste over min_tokens is cut when it arrives, with smaller shares.  Every tool
# result is cut to about AGGRESSIVE_RESULT_CAP tokens, its most relevant definitions first: the
# safe rule with a far smaller limit.  A small read is shown whole and a large one keeps what ranks
# best up to the limit; a quarter of the read, picked by a vaguely worded task's ranking, too often
# missed the code the task changes.  An earlier task's results keep only what the conversation
# names: the task they served is over, and every later turn pays to re-read them.  Compaction keeps
# only the latest result and comes sooner.
#
# Nor is an earlier task's read held whole because the agent keeps re-reading its file
# (``hold_returned_reads`` off).  Such a read is cheap to compact only while its task is among the
# latest two (the proxy's breakpoints at those task starts keep the cache of what precedes it); held
# past that, it sits so deep in the cached prefix that no later step pays to clear it, and it is
# read again on every turn of the rest of the session.  Its task is over: it goes with the rest of
# that task's results, and a later re-read is cut on arrival like any new result.
#
# For the same reason an earlier task's re-read forwarded as pointers into an earlier read (the
# file edited in between: its changed lines verbatim, often thousands of tokens) is compacted with
# its task too (``compact_pointers``), to what the conversation names, like any read of that task.
#
# Rule 2's floor (a piece under ``min_tokens`` stays whole) does not hold an earlier task's results
# either (``earlier_min_tokens`` 0): it protects what the agent is working with, where a cut of a
# small read saves little and risks what the task needs.  An earlier task's small reads (projects
# that put each type or command in a file of its own) otherwise stay whole for the rest of the
# session, and every later turn pays to read them again from the cache.
#
# The same holds for an earlier task's long own text: a pasted log, benchmark output, a pull
# request's long description (``earlier_text``).  It served the task it asked; kept whole, every
# later turn reads it again, and it sits before the reads that follow it, so that a step clearing
# those must re-bill it too.  At compaction it keeps its opening (what it was about) and its end
# (what it asked), as the question does of a long message.
#
# A new task's words alone take no compaction step while the task just ended still holds its results
# as they arrived (``defer_task_start``): the hold ends at the task's first tool call, and the step
# there compacts them.  A step at the words cleared only what the hold leaves out (a re-read forwarded
# as pointers among those results) and re-billed the held results behind it; the next step, one
# request after the first tool call, re-billed them again.  Safe mode is left as it was (its figures
# are the reference the issue holds fixed); whether it would gain too was not measured.
AGGRESSIVE_RESULT_CAP = 3_000
_AGGRESSIVE = dict(paste_cap=0, result_cap=AGGRESSIVE_RESULT_CAP, budget_ratio=0.25, rel_score=0.3,
                   earlier_ratio=0.0, earlier_cap=0, keep_tool_uses=1, trigger=12_000, clear_at_least=3_000,
                   likely_cap=SAFE_RESULT_CAP, hold_returned_reads=False, compact_pointers=True,
                   earlier_min_tokens=0, earlier_text=2_000,
                   defer_task_start=True)


@dataclass
class CompressionResult:
    body: dict | None                     # the body to forward; None = forward unchanged
    reason: str                           # what happened, for logs and tests
    mode: str = "safe"                    # safe | aggressive | off
    conversation: str | None = None       # stable id of the conversation the request belongs to
    compaction: bool = False              # earlier, already forwarded messages are forwarded in a new form
    prefix_invalidated_tokens: int = 0    # previously forwarded tokens the provider must now re-read uncached
    question: str | None = None
    replaced_tokens: int = 0              # tokens of the code this body forwards in a changed form ...
    replacement_tokens: int = 0           # ... and of what stands in its place
    runs: int = 0                         # pieces forwarded in a changed form
    sources: list[str] = field(default_factory=list)        # their files
    slice_symbols: list[str] = field(default_factory=list)  # "path::qualname" of the definitions kept in them

    @property
    def changed(self) -> bool:
        return self.body is not None


class Compressor:
    """The compression state of one serve process: project matcher, token counts, conversations."""

    def __init__(self, ws, settings: CompressionSettings | None = None, store: ConversationStore | None = None):
        self.ws = ws
        self.settings = settings or CompressionSettings()
        self.matcher = ProjectMatcher(ws)
        self.tokens = TokenCache()
        self.plans = PlanCache()
        self.conversations = store or ConversationStore()
        self._base = SizedLRU(MAX_BASE_ENTRIES, MAX_BASE_BYTES)   # (system, tools) pickles -> tokens

    def compress(self, body: dict, api: str) -> CompressionResult:
        if api == RESPONSES:
            return self._compress_responses(body)
        s = self.settings
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return CompressionResult(None, "no messages", mode=s.mode)
        system = body.get("system")
        first_user = next((i for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "user"), 0)
        cid = conversation_id(api, system, msgs[:first_user + 1])
        if s.mode == "off":
            return CompressionResult(None, "compression off", mode="off", conversation=cid)
        keys = [message_key(m) for m in msgs]
        conv = self.conversations.get(cid)
        with conv.lock:
            base, matched = conv.best(keys)
            before = as_of(base.records, matched) if base is not None else ()
            marks = free_marks(body) if api == ANTHROPIC else 0
            work = RequestPass(s, self.matcher, self.tokens, self.plans, api, msgs, list(before),
                               self._base_tokens(body), cache_economics(body, api), marks,
                               last_marked_message(body) if marks else None)
            for i in range(matched, len(msgs)):
                work.arrive(i)
                if work.boundary(i):
                    work.maybe_compact()
            records = tuple(work.records)
            conv.save(base, matched, records)
        self.conversations.trim()
        return self._result(body, msgs, records, before, cid, work)

    def _compress_responses(self, body: dict) -> CompressionResult:
        """A Responses request, compressed through its chat view and mapped back item by item."""
        view = chat_view(body)
        if view is None:
            return CompressionResult(None, "no input items", mode=self.settings.mode)
        result = self.compress(view, OPENAI)
        if result.body is not None:
            result.body = apply_view(body, result.body["messages"])
        return result

    def _result(self, body, msgs, records: tuple[Record, ...], before, cid: str, work) -> CompressionResult:
        s = self.settings
        question = work.question() or None
        changed = [i for i, r in enumerate(records) if r.changed]
        first_moved = next((i for i, (old, new) in enumerate(zip(before, records)) if old != new), None)
        invalidated = sum(r.tokens for r in records[first_moved:len(before)]) if first_moved is not None else 0
        common = dict(mode=s.mode, conversation=cid, compaction=first_moved is not None,
                      prefix_invalidated_tokens=invalidated, question=question)
        marked = sorted(i for i in task_marks(records, work.marks, work.mark_before)
                        if i < len(msgs) and isinstance(msgs[i], dict))
        if not changed and not marked:
            return CompressionResult(None, "nothing to compress", **common)
        out_msgs = list(msgs)
        replaced = replacement = runs = 0
        sources: list[str] = []
        symbols: list[str] = []
        for i in changed:
            out_msgs[i] = forwarded_message(msgs[i], records[i])
            for p in records[i].pieces:
                if p.form is None:
                    continue
                replaced += p.tokens
                replacement += p.form_tokens
                # Whole: all its code, only the line numbers' padding gone; a user's own text: no file.
                if p.status == "whole" or p.kind == "text":
                    continue
                runs += 1
                # The ledger names files as the index does: an agent's absolute path (Claude Code
                # writes them) would count one file twice and store where the project lives.
                path = self._project_path(p.path)
                if path not in sources:
                    sources.append(path)
                symbols.extend(f"{path}::{q}" for q in p.kept)
        for i in marked:
            # The proxy's breakpoints at the latest task starts (see .breakpoints).
            out_msgs[i] = with_mark(out_msgs[i], mark_control(body, i)) or out_msgs[i]
        out = dict(body)
        out["messages"] = out_msgs
        reason = "compaction step" if first_moved is not None else "compressed" if changed else "task breakpoints"
        return CompressionResult(out, reason, replaced_tokens=replaced, replacement_tokens=replacement, runs=runs,
                                 sources=sources, slice_symbols=list(dict.fromkeys(symbols)), **common)

    def _project_path(self, written: str) -> str:
        """The indexed path a tool or the user wrote as ``written`` (absolute, ``./x``), or
        ``written`` itself when it names no single indexed file."""
        try:
            found = self.matcher.resolve_path(written)
        except (StoreError, RuntimeError):  # a refreshing graph: the path as written
            return written
        return found[0] if len(found) == 1 else written

    def _base_tokens(self, body: dict) -> int:
        """Tokens of the system prompt and tool definitions, counted once per distinct pair.

        Remembered by the pair's pickles: exact values (1, 1.0 and True apart, key order kept)
        written out in C without escaping, a tenth of what their reprs cost (an agent's 20 KB
        system prompt and ten tools: 146 -> 15 us)."""
        system, tools = body.get("system"), body.get("tools")
        if system is None and tools is None:
            return 0
        try:
            key = (pickle.dumps(system, protocol=4), pickle.dumps(tools, protocol=4))
        except Exception:   # not a JSON value: counted, not remembered
            key = None
        if key is not None:
            hit = self._base.get(key)
            if hit is not None:
                return hit
        n = self.tokens.count(system if isinstance(system, str) else json.dumps(system, ensure_ascii=False))
        if tools is not None:
            n += self.tokens.count(json.dumps(tools, ensure_ascii=False))
        if key is not None:
            self._base.put(key, n, len(key[0]) + len(key[1]))
        return n

