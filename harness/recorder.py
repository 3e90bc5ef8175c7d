"""Turns finished proxy requests into ledger rows, off the request path.

Counting tokens, reading the answer and the SQLite write happen on one
background thread, so a busy index writer never stalls a response.  Shutdown
drains the queue before the store closes: nothing accepted is lost.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass

from memstrata.storage import ledger
from memstrata.storage.ledger import LedgerEntry

from .analysis import parse_answer, prompt_tokens, symbol_overlap
from .compress_request import CompressionResult

log = logging.getLogger(__name__)
_STOP = object()


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


class Recorder:
    def __init__(self, ws, metrics=None, session_id: int | None = None):
        self.ws = ws
        self.metrics = metrics
        self.session_id = session_id
        self._q: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="memstrata-ledger", daemon=True)
        self._thread.start()

    def submit(self, item: Finished) -> None:
        self._q.put(item)

    def flush(self) -> None:
        """Block until everything submitted so far is written."""
        self._q.join()

    def close(self) -> None:
        self._q.put(_STOP)
        self._thread.join()

    def _run(self) -> None:
        while True:
            item = self._q.get()
            batch = [item]
            while item is not _STOP:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                batch.append(item)
            work = [b for b in batch if b is not _STOP]
            try:
                if work:
                    self._write(work)
            except Exception as exc:  # keep serving; say what failed without request content
                log.warning("could not record %d ledger row(s): %s", len(work), type(exc).__name__)
            finally:
                for _ in batch:
                    self._q.task_done()
            if len(work) != len(batch):
                return

    def _write(self, items: list[Finished]) -> None:
        entries = [self.entry(it) for it in items]
        ledger.record(self.ws.store, entries)
        if self.metrics is not None:
            project = self.metrics.project
            for e in entries:
                if e.status is not None and 200 <= e.status < 300:
                    self.metrics.tokens_sent.labels(project=project).inc(e.tokens_forwarded)
                    self.metrics.tokens_saved.labels(project=project).inc(max(e.tokens_saved, 0))

    def entry(self, it: Finished) -> LedgerEntry:
        comp = it.compression
        original = prompt_tokens(it.body, it.api)
        forwarded = prompt_tokens(comp.body, it.api) if comp is not None and comp.changed else original
        e = LedgerEntry(
            time=it.time, endpoint=it.endpoint, provider=it.provider, model=it.model, stream=it.stream,
            status=it.status, error=it.error, compressed=bool(comp and comp.changed),
            tokens_original=original, tokens_forwarded=forwarded, duration_ms=round(it.duration_ms, 3),
            session_id=it.session_id if it.session_id is not None else self.session_id,
        )
        if it.response:
            ans = parse_answer(it.api, it.stream, it.response)
            e.input_tokens, e.output_tokens = ans.input_tokens, ans.output_tokens
            if comp is not None and comp.changed:
                e.sources = list(comp.sources)
                if it.status is not None and 200 <= it.status < 300 and ans.text:
                    graph = self.ws.graph
                    e.answer_symbols, e.slice_symbols, e.symbol_hits = symbol_overlap(
                        ans.text, comp.slice_symbols, lambda name: bool(graph.definitions(name)))
        elif comp is not None and comp.changed:
            e.sources = list(comp.sources)
        return e
