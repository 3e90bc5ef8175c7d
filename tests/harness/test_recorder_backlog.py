"""The savings recorder's queue is bounded: with its writer stuck behind a lock another
process holds on the ledger (as on a stuck disk), hand-offs beyond the bound are dropped,
counted and logged once, and everything queued is written once the lock goes."""

from __future__ import annotations

import logging

from memstrata.harness.proxy.metrics import Metrics
from memstrata.harness.proxy.recorder import Finished, Recorder
from memstrata.storage import Store, ledger

BOUND = 4
SENT = 25


def failed_request(i: int) -> Finished:
    return Finished(time=3000.0 + i, endpoint="openai.chat", api="openai", provider="openai", model="gpt-4o",
                    stream=False, status=None, error="connect",
                    body={"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * 10_000}]},
                    compression=None, response=None, duration_ms=1.0, session_id=None)


def test_full_queue_drops_counts_and_logs_once(python_ws, caplog, wait_until):
    ws = python_ws
    metrics = Metrics("proj")
    rec = Recorder(ws, metrics, None, max_pending=BOUND)
    before = ledger.count(ws.store)
    blocker = Store(ws.store.path)  # a second connection, as another process would hold
    try:
        with caplog.at_level(logging.WARNING, logger="memstrata.harness.proxy.recorder"):
            with blocker.write():  # the ledger's writer now waits on this lock
                rec.submit(failed_request(0))
                wait_until(lambda: rec._q.qsize() == 0, message="the writer took the first row")
                for i in range(1, SENT):
                    rec.submit(failed_request(i))
                    assert rec._q.qsize() <= BOUND
            rec.flush()
    finally:
        rec.close()
        blocker.close()
    dropped = rec.dropped.get("row", 0)
    assert dropped == SENT - 1 - BOUND
    assert ledger.count(ws.store) - before == SENT - dropped
    assert metrics.registry.get_sample_value("memstrata_ledger_dropped_total", {"kind": "row"}) == dropped
    warnings = [r for r in caplog.records if "not keeping up" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
