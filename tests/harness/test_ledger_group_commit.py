"""Completed requests' ledger rows are committed in shared transactions (group commit): a
request's wait ends only once its own row is on disk, and requests completing while a
transaction is being written share the next one instead of taking one each."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from memstrata.harness.proxy.recorder import Finished, Recorder
from memstrata.storage import Store, ledger

N = 12


def completed_request(i: int) -> Finished:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"question {i}"}]}
    return Finished(time=5000.0 + i, endpoint="openai.chat", api="openai", provider="openai", model="gpt-4o",
                    stream=False, status=200, error=None, body=body, compression=None,
                    response=b'{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 1}}',
                    duration_ms=1.0, session_id=None)


def on_disk(path, row_id: int) -> bool:
    """Whether another connection (another process, after a crash) sees the row."""
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute("SELECT COUNT(*) FROM ledger WHERE id = ?", (row_id,)).fetchone()[0] == 1
    finally:
        conn.close()


@pytest.fixture
def batches(monkeypatch):
    """The size of every ledger.record transaction, in order."""
    sizes: list[int] = []
    record = ledger.record

    def counted(store, entries):
        entries = list(entries)
        sizes.append(len(entries))
        return record(store, entries)

    monkeypatch.setattr(ledger, "record", counted)
    return sizes


def test_rows_completing_together_share_a_transaction(python_ws, batches, wait_until):
    ws = python_ws
    rec = Recorder(ws, None, None)
    blocker = Store(ws.store.path)  # another process holding the write lock, as a slow disk would
    before = ledger.count(ws.store)
    seen_on_disk: list[bool] = []

    async def complete(item: Finished) -> None:
        await rec.commit_completed(item)
        seen_on_disk.append(item.entry is not None and on_disk(ws.store.path, item.entry.id))

    async def main() -> None:
        hold = blocker.write()
        hold.__enter__()
        try:
            first = asyncio.ensure_future(complete(completed_request(0)))
            await asyncio.to_thread(wait_until, lambda: batches, message="the first row's transaction began")
            rest = [asyncio.ensure_future(complete(completed_request(i))) for i in range(1, N)]
            await asyncio.sleep(0.3)
            assert not first.done() and not any(t.done() for t in rest), "answered before the row was written"
        finally:
            hold.__exit__(None, None, None)
        await asyncio.gather(first, *rest)

    try:
        asyncio.run(main())
        rec.flush()
    finally:
        rec.close()
        blocker.close()
    assert seen_on_disk == [True] * N
    assert ledger.count(ws.store) - before == N
    completion = [n for n in batches if n][:2]
    assert completion == [1, N - 1], batches  # one transaction for the first row, one for the other eleven


def test_a_failed_transaction_releases_its_requests_and_the_rows_follow(python_ws, monkeypatch):
    """A transaction that fails (a full disk) must not leave the answers waiting; the recorder's
    thread writes the rows afterwards, as it did when a row's own transaction failed."""
    ws = python_ws
    rec = Recorder(ws, None, None)
    record = ledger.record
    failures = []

    def fail_once(store, entries):
        entries = list(entries)
        if not failures and entries:
            failures.append(len(entries))
            raise sqlite3.OperationalError("database or disk is full")
        return record(store, entries)

    monkeypatch.setattr(ledger, "record", fail_once)
    before = ledger.count(ws.store)
    items = [completed_request(100 + i) for i in range(3)]

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(*(rec.commit_completed(it) for it in items)), timeout=30)

    try:
        asyncio.run(main())
        rec.flush()
    finally:
        rec.close()
    assert failures
    rows = ledger.entries(ws.store, limit=100_000)[before:]
    assert sorted(r.time for r in rows) == [it.time for it in items]
    assert all(r.input_tokens == 7 for r in rows)


def test_completing_after_close_still_writes_the_row(python_ws):
    ws = python_ws
    rec = Recorder(ws, None, None)
    before = ledger.count(ws.store)
    rec.close()
    item = completed_request(200)
    asyncio.run(asyncio.wait_for(rec.commit_completed(item), timeout=30))
    assert item.entry is not None and on_disk(ws.store.path, item.entry.id)
    assert ledger.count(ws.store) == before + 1
