"""Turns proxied requests into ledger rows: counted off the request path,
written before the client has its last byte.

* :meth:`Recorder.begin` (when the request is forwarded) hands the token
  counting of the original and forwarded bodies to the recorder's thread, so
  it runs while the upstream works on the answer.
* :meth:`Recorder.commit_completed` (when the response is complete, just
  before its last bytes go out) inserts the row, with the usage the provider
  reported and the counts if they are ready (``counted = 0`` otherwise), and
  returns once it is committed.  A crash after that point loses nothing the
  client has seen.  Rows of requests that complete together share one
  transaction, as a database's group commit does: the committing thread
  writes whatever completed while it wrote the last batch.  One transaction
  a row cost every request a BEGIN/COMMIT, a worker thread and a turn on the
  store's lock, which under many concurrent agents lengthened every answer's
  end.  (:meth:`Recorder.commit` is the same write, blocking, one row.)
* The recorder's thread then fills in what is still missing (counts, the
  answer's symbol overlap), moves the metrics and drains at shutdown.

Requests that did not complete (upstream errors, clients that went away) go
through :meth:`Recorder.submit` and are written by the thread alone.

The hand-off queue is bounded (:data:`MAX_PENDING`): requests carry their
bodies, so a slow or stuck disk must not grow memory without limit.  When it
is full the proxy keeps serving and the hand-off is dropped, counted
(``memstrata_ledger_dropped_total{kind}`` and :attr:`Recorder.dropped`) and
logged once: a ``counting`` costs nothing (the thread counts with the row),
a ``completion`` leaves the row written at completion with ``counted = 0``,
a ``row`` (a request that did not complete) is not recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
from dataclasses import dataclass, field

from memstrata.storage import Store, ledger
from memstrata.storage.ledger import LedgerEntry

from .analysis import Answer, _count, message_texts, parse_answer, prompt_tokens, symbol_overlap
from .compress_request import ANTHROPIC, RESPONSES, CompressionResult
from .labels import Labels
from .counterfactual import (
    NO_CACHE, OPENAI_FAMILY, FramingEstimate, ShadowCache, Split, TextRatio, framing_tokens, has_uncounted_parts,
    prompt_blocks, scaled,
)
from .context_editing import ContextEdits, cleared, context_edits, provider_view, thinking_cleared
from .providers import Providers, ProvidersError
from .savings import price

log = logging.getLogger(__name__)
_STOP = object()

# Hand-offs waiting for the recorder's thread; each holds a request body (and
# its answer), so this bounds the memory a stuck disk can pin.
MAX_PENDING = 1024


class Counting:
    """The whole-request token counts of one request, filled in by the recorder's thread, and how the
    provider would have billed the request as the client sent it (priced against the shadow cache
    in arrival order, which is the order the recorder's thread runs them in)."""

    def __init__(self, body: dict, compression: CompressionResult | None, api: str, *,
                 shadow: ShadowCache | None = None, family: str = NO_CACHE, model: str | None = None,
                 arrived: float = 0.0, framing: FramingEstimate | None = None,
                 text_ratio: TextRatio | None = None):
        self.body = body
        self.compression = compression
        self.api = api
        self.shadow = shadow
        self.family = family
        self.model = model
        self.arrived = arrived
        self.framing = framing
        self.text_ratio = text_ratio
        self._observed = False
        # Anthropic's server-side context editing (tool results, thinking), when the request asks for it
        self.edit = context_edits(body) if api == ANTHROPIC and shadow is not None else None
        self._forwarded_thinned: dict | None = None   # with it: the forwarded request after its thinking clearing
        self._forwarded_raw = 0        # ... its count, before the provider clears tool results
        self._forwarded_cleared = 0    # ... and the tool uses the model expects the provider to clear of it
        self.original: int | None = None
        self.forwarded: int | None = None
        self.counterfactual: Split | None = None
        self._done = threading.Event()

    @property
    def changed(self) -> bool:
        return bool(self.compression is not None and self.compression.changed)

    def run(self) -> None:
        try:
            if self.edit is not None:
                try:
                    self._run_edited()
                    return
                except Exception:   # a body the model cannot read: counted and billed as sent, as before
                    self.edit = None
            blocks = None
            if self.shadow is not None and self.api != RESPONSES:
                # The bill's blocks hold every text of the request, counted: the last one's count is
                # the request's, so its texts are walked (tool definitions written out) once, not twice.
                try:
                    blocks = prompt_blocks(self.body, self.api, self.model)
                except Exception:
                    blocks = None   # counted and billed below as before (the bill fails again there)
            self.original = blocks[-1].tokens if blocks else prompt_tokens(self.body, self.api)
            self.forwarded = self._forwarded_tokens() if self.changed else self.original
            if self.shadow is not None:
                self.counterfactual = self.shadow.bill(self.body, self.api, self.family, self.model, self.arrived,
                                                       blocks=blocks)
        finally:
            self._done.set()

    def _run_edited(self) -> None:
        """A request asking the provider to clear old tool results itself (Anthropic's context editing):
        the provider bills and caches each request after its clearing, so the request as sent is
        counted and priced after the clearing the provider would have applied to it, and the forwarded
        one after the clearing it applies to that (see :mod:`.context_editing`)."""
        key = (self.api, self.model)
        per_block = self.framing.per_block(key) if self.framing is not None else 0.0
        ratio = (self.text_ratio.get(key, per_block) if self.text_ratio is not None else None) or 1.0
        blocks = prompt_blocks(self.body, self.api, self.model)
        framing = per_block * len(blocks)
        view, _ = provider_view(self.body, self.edit, blocks[-1].tokens if blocks else 0, ratio, framing)
        if view is not self.body:
            blocks = prompt_blocks(view, self.api, self.model)
        self.original = blocks[-1].tokens if blocks else 0
        if self.changed:
            fwd = self.compression.body
            if self.edit.thinking is not None:   # no trigger: the model's clearing is the provider's
                fwd, _ = thinking_cleared(fwd, self.edit.thinking)
            self._forwarded_thinned = fwd
            self._forwarded_raw = prompt_tokens(fwd, self.api)
            fwd_view, self._forwarded_cleared = provider_view(fwd, ContextEdits(tool_uses=self.edit.tool_uses),
                                                              self._forwarded_raw, ratio, framing)
            self.forwarded = prompt_tokens(fwd_view, self.api) if fwd_view is not fwd else self._forwarded_raw
        else:
            self.forwarded = self.original
        if self.shadow is not None:
            self.counterfactual = self.shadow.bill(view, self.api, self.family, self.model, self.arrived,
                                                   blocks=blocks)

    def _forwarded_after(self, ans: Answer) -> int:
        """The forwarded request's count after the clearing the provider reports it applied: its
        ``applied_edits`` say how many tool uses it cleared, which the model of its rules only estimates."""
        n = ans.cleared_tool_uses
        if (self.edit is None or self.edit.tool_uses is None or not self.changed or n is None
                or n == self._forwarded_cleared):
            return self.forwarded or 0
        _, gone = cleared(self._forwarded_thinned, self.edit.tool_uses, n)
        return self._forwarded_raw - gone

    def _forwarded_tokens(self) -> int:
        """The forwarded body's count.  A compressed request differs from the one sent only in some
        of its messages (the compressor replaces those and keeps every other value, the system
        prompt and the tool definitions included, as the same objects), and a request's count is
        the sum of its texts' counts: so it is the original count less what the replaced messages
        counted, plus what their forwarded forms count, instead of every text of the request
        walked again and every tool definition written out as JSON again.  Any other shape is
        counted whole."""
        sent, fwd = self.body, self.compression.body
        msgs, out = sent.get("messages"), fwd.get("messages")
        if (self.api == RESPONSES or not isinstance(msgs, list) or not isinstance(out, list)
                or len(msgs) != len(out) or fwd.keys() != sent.keys()
                or any(fwd[k] is not v for k, v in sent.items() if k != "messages")):
            return prompt_tokens(fwd, self.api)
        n = self.original
        for old, new in zip(msgs, out):
            if new is not old:
                if isinstance(old, dict):
                    n -= sum(_count(t) for t in message_texts(old, self.api))
                if isinstance(new, dict):
                    n += sum(_count(t) for t in message_texts(new, self.api))
        return n

    @property
    def done(self) -> bool:
        return self._done.is_set() and self.original is not None

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout) and self.original is not None

    def tokens(self) -> tuple[int, int] | None:
        return (self.original, self.forwarded) if self.done else None

    def counterfactual_usage(self, ans: Answer) -> tuple[int, int, int, int] | None:
        """(input, cache read, cache write, of those writes the 1-hour ones) the provider would have
        billed for the unmodified request, in its own tokens; None until counted or when it reported
        no usage."""
        if not self.done or self.counterfactual is None or ans.input_tokens is None:
            return None
        reported = ans.input_tokens + (ans.cache_read_tokens or 0) + (ans.cache_write_tokens or 0)
        key = (self.api, self.model)
        if self.edit is not None:
            self.forwarded = self._forwarded_after(ans)
        # Images and files are billed beside the texts: such a request teaches neither the framing
        # nor the text ratio, and its removed texts are priced at the ratio of text-only requests.
        uncounted = has_uncounted_parts(self.body, self.api)
        fitted = not (self.family == OPENAI_FAMILY or self.framing is None)
        per_block = 0.0
        if not fitted:
            framing = framing_tokens(self.body, self.api, self.family)   # published: OpenAI's
        else:
            if not self._observed and not uncounted:
                self.framing.observe(key, self.forwarded or 0, self.counterfactual.blocks, reported)
            per_block = self.framing.per_block(key)
            framing = round(per_block * self.counterfactual.blocks)
        if self.text_ratio is not None and not self._observed and not uncounted:
            # a fitted framing is taken out when the ratio is read, at the share known then
            if fitted:
                self.text_ratio.observe(key, self.forwarded or 0, reported, self.counterfactual.blocks)
            else:
                self.text_ratio.observe(key, self.forwarded or 0, reported - min(framing, reported))
        self._observed = True
        if not self.changed:
            # Forwarded as the client sent it: the provider billed the very request the counterfactual
            # prices, by its own count and cache.  (The shadow's estimate can differ from it: it counts
            # in cl100k, so a prefix near the provider's cacheable minimum may fall on the other side.)
            return (ans.input_tokens, ans.cache_read_tokens or 0, ans.cache_write_tokens or 0,
                    ans.cache_write_1h_tokens or 0)
        ratio = None
        if uncounted:
            ratio = self.text_ratio.get(key, per_block) if self.text_ratio is not None else None
            ratio = 1.0 if ratio is None else ratio  # none learnt yet: the provider counts as cl100k
        return scaled(self.counterfactual, reported, self.forwarded or 0, framing, text_ratio=ratio)


@dataclass
class Finished:
    time: float
    endpoint: str
    api: str
    provider: str | None
    model: str | None
    stream: bool
    status: int | None
    error: str | None
    body: dict
    compression: CompressionResult | None
    response: bytes | None
    duration_ms: float
    session_id: int | None
    counting: Counting | None = None
    entry: LedgerEntry | None = field(default=None, repr=False)   # set once committed
    answer: Answer | None = field(default=None, repr=False)


def _settle(done: asyncio.Future) -> None:
    if not done.done():
        done.set_result(None)


def miss_split(invalidated: int, api: str, ans: Answer) -> tuple[int, int]:
    """(miss_write, miss_input): how the provider re-billed the ``invalidated`` prefix tokens.

    Written back to the cache when the provider reports cache writes, else at
    the full input rate -- except on Anthropic when the request used no
    caching at all (zero reads and zero writes reported): nothing was cached,
    so nothing was missed.  Bounded by what the provider reports it billed.
    """
    if invalidated <= 0:
        return 0, 0
    if ans.cache_write_tokens:
        return min(invalidated, ans.cache_write_tokens), 0
    if api == ANTHROPIC and ans.cache_read_tokens == 0 and ans.cache_write_tokens == 0:
        return 0, 0
    bound = invalidated if ans.input_tokens is None else min(invalidated, ans.input_tokens)
    return 0, bound


def _set_counterfactual(e: LedgerEntry, counting: Counting, ans: Answer) -> None:
    usage = counting.counterfactual_usage(ans)
    if usage is not None:
        e.cf_input_tokens, e.cf_cache_read_tokens, e.cf_cache_write_tokens, e.cf_cache_write_1h_tokens = usage


class Recorder:
    def __init__(self, ws, metrics=None, session_id: int | None = None, *, store: Store | None = None,
                 providers: Providers | None = None, max_pending: int = MAX_PENDING,
                 labels: Labels | None = None):
        self.ws = ws
        self.labels = labels or Labels()  # who recorded the rows (the serve process's, never a request's)
        self.metrics = metrics
        self.session_id = session_id
        self.store = store if store is not None else ws.store
        self._providers = providers
        self._providers_fixed = providers is not None
        self._providers_stamp: tuple | None = None
        self.shadow = ShadowCache()  # the provider's prompt cache had every request gone out unmodified
        self.framing = FramingEstimate()  # what the provider adds per block, the same sent or forwarded
        self.text_ratio = TextRatio()  # the provider's tokens per cl100k token of a request's texts
        self._q: queue.Queue = queue.Queue(maxsize=max_pending)
        self.dropped: dict[str, int] = {}  # hand-offs dropped on a full queue, by kind
        self._dropped_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="memstrata-ledger", daemon=True)
        self._thread.start()
        # Completed requests waiting for their row's transaction (see the module doc).
        self._completed: list[tuple[Finished, asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._completed_cv = threading.Condition()
        self._closing = False
        self._committer = threading.Thread(target=self._run_commits, name="memstrata-ledger-commit", daemon=True)
        self._committer.start()

    # -- the request path's hand-offs -----------------------------------------------------

    def begin(self, body: dict, compression: CompressionResult | None, api: str, *, family: str = NO_CACHE,
              model: str | None = None, arrived: float = 0.0) -> Counting:
        counting = Counting(body, compression, api, shadow=self.shadow, family=family, model=model,
                            arrived=arrived, framing=self.framing, text_ratio=self.text_ratio)
        self._hand_over(counting, "counting")
        return counting

    def submit(self, item: Finished) -> None:
        """Record a request that did not complete; written by the recorder's thread."""
        self._hand_over(item, "row")

    def commit(self, item: Finished) -> None:
        """Write a completed request's row now (blocking; run it off the event loop)."""
        self._commit_rows([item])

    async def commit_completed(self, item: Finished) -> None:
        """:meth:`commit` for the event loop: returns once the row is committed, in a transaction
        shared with the other requests completing meanwhile."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        with self._completed_cv:
            queued = not self._closing
            if queued:
                self._completed.append((item, loop, done))
                self._completed_cv.notify()
        if queued:
            await done
        else:  # shutting down: the committing thread may be gone
            await loop.run_in_executor(None, self.commit, item)

    def _commit_rows(self, items: list[Finished]) -> None:
        entries = [self._entry(it) for it in items]
        try:
            ledger.record(self.store, entries)
        except Exception as exc:  # the thread tries again with the rest of the rows
            log.warning("could not record %d ledger row(s) at completion: %s", len(entries), type(exc).__name__)
            for entry in entries:
                entry.id = None  # rolled back, whatever ids the inserts had handed out
        else:
            for it, entry in zip(items, entries):
                it.entry = entry
        for it in items:
            self._hand_over(it, "completion")

    def _run_commits(self) -> None:
        while True:
            with self._completed_cv:
                while not self._completed and not self._closing:
                    self._completed_cv.wait()
                batch, self._completed = self._completed, []
                if not batch:  # closing, and nothing left to write
                    return
            try:
                self._commit_rows([item for item, _loop, _done in batch])
            except Exception as exc:  # a row that cannot even be built: its request must not hang
                log.warning("could not record %d ledger row(s) at completion: %s", len(batch), type(exc).__name__)
            finally:
                for _item, loop, done in batch:
                    with contextlib.suppress(RuntimeError):  # that request's loop has already closed
                        loop.call_soon_threadsafe(_settle, done)

    def _hand_over(self, item: Counting | Finished, kind: str) -> None:
        """Queue ``item`` for the thread, never waiting: a full queue drops it (see the module doc)."""
        try:
            self._q.put_nowait(item)
            return
        except queue.Full:
            pass
        with self._dropped_lock:
            first = not self.dropped
            self.dropped[kind] = self.dropped.get(kind, 0) + 1
        if self.metrics is not None:
            self.metrics.ledger_dropped.labels(kind=kind).inc()
        if first:
            log.warning("the savings ledger is not keeping up (%d requests waiting to be written): a %s "
                        "was dropped; further drops are counted in memstrata_ledger_dropped_total, "
                        "not logged", self._q.maxsize, kind)

    def flush(self) -> None:
        """Block until everything handed over so far is written."""
        self._q.join()

    def close(self) -> None:
        with self._completed_cv:
            self._closing = True
            self._completed_cv.notify()
        self._committer.join()  # writes what is still waiting, then hands it to the thread below
        self._q.put(_STOP)
        self._thread.join()

    # -- the recorder's thread -------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = [self._q.get()]
            while batch[-1] is not _STOP:
                try:
                    batch.append(self._q.get_nowait())
                except queue.Empty:
                    break
            work = []
            for item in batch:
                if isinstance(item, Counting):
                    self._count(item)
                elif isinstance(item, Finished):
                    work.append(item)
            try:
                if work:
                    self._write(work)
            except Exception as exc:  # keep serving; say what failed without request content
                log.warning("could not record %d ledger row(s): %s", len(work), type(exc).__name__)
            finally:
                for _ in batch:
                    self._q.task_done()
            if batch[-1] is _STOP:
                return

    @staticmethod
    def _count(counting: Counting) -> None:
        try:
            counting.run()
        except Exception as exc:
            log.warning("could not count a request's tokens: %s", type(exc).__name__)

    def _write(self, items: list[Finished]) -> None:
        fresh, updates, unchanged = [], [], []
        for it in items:
            if it.counting is not None and not it.counting.done:
                self._count(it.counting)  # begin() was skipped or failed: count now
            if it.entry is None:
                fresh.append(self._entry(it))
            elif self._fill(it.entry, it):
                updates.append(it.entry)
            else:  # written whole at completion: nothing to add
                unchanged.append(it.entry)
        ledger.record(self.store, fresh)
        ledger.complete(self.store, updates)
        self._count_metrics(fresh + updates + unchanged)

    # -- building rows ---------------------------------------------------------------------

    def _answer(self, it: Finished) -> Answer:
        if it.answer is None:
            it.answer = parse_answer(it.api, it.stream, it.response) if it.response else Answer()
        return it.answer

    def _entry(self, it: Finished) -> LedgerEntry:
        comp = it.compression
        changed = bool(comp is not None and comp.changed)
        ans = self._answer(it)
        invalidated = int(getattr(comp, "prefix_invalidated_tokens", 0) or 0) if comp is not None else 0
        miss_write, miss_input = miss_split(invalidated, it.api, ans)
        e = LedgerEntry(
            time=it.time, endpoint=it.endpoint, provider=it.provider, model=it.model, stream=it.stream,
            status=it.status, error=it.error, compressed=changed, tokens_original=0, tokens_forwarded=0,
            duration_ms=round(it.duration_ms, 3),
            session_id=it.session_id if it.session_id is not None else self.session_id,
            input_tokens=ans.input_tokens, output_tokens=ans.output_tokens,
            cache_read_tokens=ans.cache_read_tokens, cache_write_tokens=ans.cache_write_tokens,
            cache_write_1h_tokens=ans.cache_write_1h_tokens,
            mode=getattr(comp, "mode", None), conversation=getattr(comp, "conversation", None),
            compaction=bool(getattr(comp, "compaction", False)), prefix_invalidated_tokens=invalidated,
            miss_write_tokens=miss_write, miss_input_tokens=miss_input,
            sources=list(comp.sources) if changed else [], counted=False,
            user_label=self.labels.user, host_label=self.labels.host,
        )
        if it.counting is not None and it.counting.done:
            e.tokens_original, e.tokens_forwarded = it.counting.original, it.counting.forwarded
            e.counted = True
            _set_counterfactual(e, it.counting, ans)
        return e

    def _fill(self, e: LedgerEntry, it: Finished) -> bool:
        """What the thread adds to a row: the counts if still missing, the answer's overlap.
        Whether it added anything."""
        added = False
        if not e.counted and it.counting is not None and it.counting.done:
            e.tokens_original, e.tokens_forwarded = it.counting.original, it.counting.forwarded
            e.counted = True
            _set_counterfactual(e, it.counting, self._answer(it))
            added = True
        comp = it.compression
        ans = self._answer(it)
        # Measured where code was cut (a read forwarded whole without its numbers' padding is not).
        if comp is not None and comp.runs and it.status is not None and 200 <= it.status < 300 and ans.text:
            graph = self.ws.graph
            e.answer_symbols, e.slice_symbols, e.symbol_hits = symbol_overlap(
                ans.text, comp.slice_symbols, lambda name: bool(graph.definitions(name)))
            added = True
        return added

    # -- metrics -------------------------------------------------------------------------------

    def providers(self) -> Providers | None:
        """providers.json as it is now (re-read when the file changes; None when invalid)."""
        if self._providers_fixed:
            return self._providers
        from .providers import providers_path

        path = providers_path()
        try:
            st = os.stat(path)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = ("missing",)
        if stamp != self._providers_stamp:
            try:
                self._providers = Providers.load(path, create=False)
            except ProvidersError:
                self._providers = None
            self._providers_stamp = stamp
        return self._providers

    def _count_metrics(self, entries: list[LedgerEntry]) -> None:
        m = self.metrics
        if m is None:
            return
        project = m.project
        ok = [e for e in entries if e.status is not None and 200 <= e.status < 300 and e.error != "not_an_answer"]
        for e in ok:
            if e.counted:
                m.tokens_sent.labels(project=project).inc(e.tokens_forwarded)
                m.tokens_saved.labels(project=project).inc(max(e.tokens_saved, 0))
            for kind, value in (("input", e.input_tokens), ("output", e.output_tokens),
                                ("cache_read", e.cache_read_tokens), ("cache_write", e.cache_write_tokens)):
                if value:
                    m.provider_tokens.labels(project=project, kind=kind).inc(value)
            if e.compaction:
                m.compactions.labels(project=project).inc()
            if e.prefix_invalidated_tokens:
                m.invalidated_tokens.labels(project=project).inc(e.prefix_invalidated_tokens)
        providers = self.providers() if ok else None
        if providers is None:
            return
        # Priced from the rows just written, with the very sums the savings figures use.
        for t in ledger.totals(self.store, row_ids=[e.id for e in ok if e.id is not None and e.counted]):
            rate = providers.rate(t.model, t.provider)
            if rate is not None:
                dollars = price(t, rate)
                m.dollars_saved.labels(project=project).inc(dollars.saved)
                m.dollars_saved_gross.labels(project=project).inc(max(dollars.gross_saved, 0.0))
                m.cache_miss_dollars.labels(project=project).inc(dollars.miss_cost)
                m.prompt_bill.labels(project=project, bill="direct").inc(dollars.bill_direct)
                m.prompt_bill.labels(project=project, bill="proxied").inc(dollars.bill_proxied)
