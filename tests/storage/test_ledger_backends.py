"""The savings ledger on both backends: the same entries give the same rows, sums and sessions
on SQLite and on PostgreSQL, labels are kept, and a killed recorder's session is seen as crashed."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict

import pytest
from memstrata.storage import Store, ledger
from memstrata.storage.ledger import LedgerEntry

DAY = 86400.0
T0 = 1_790_000_000.0   # a fixed UTC time, so the day grouping is the same on every run


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request, tmp_path):
    """``open_store(project="p")``: a writable store of that project on the parametrized backend."""
    opened = []
    if request.param == "sqlite":
        def opener(project: str = "p"):
            store = Store(tmp_path / project / ".memstrata" / "index.db")
            opened.append(store)
            return store
    else:
        url = request.getfixturevalue("pg_url")
        from memstrata.storage.postgres import PgStore

        def opener(project: str = "p"):
            store = PgStore(url, project)
            opened.append(store)
            return store
    opener.backend = request.param
    yield opener
    for store in opened:
        store.close()


def sample_entries(session_id: int | None) -> list[LedgerEntry]:
    """A varied month of rows: two users on two hosts, refused and failed requests, rows
    with and without usage, counterfactuals and measured answers, several days and models."""
    out = []
    for i in range(48):
        status = (200, 200, 201, 429, None, 200)[i % 6]
        usage = i % 5 != 0
        out.append(LedgerEntry(
            time=T0 + i * DAY / 5, endpoint=("openai.chat", "anthropic.messages")[i % 2],
            provider=("openai", "anthropic")[i % 2], model=("gpt-4o", "claude-sonnet-4", "gpt-4o-mini")[i % 3],
            stream=bool(i % 2), status=status, error=None if status else "upstream went away",
            compressed=i % 3 != 0, tokens_original=10_000 + 137 * i, tokens_forwarded=4_000 + 61 * i,
            input_tokens=3_000 + i if usage else None, output_tokens=200 + i if usage else None,
            cache_read_tokens=(900 + 7 * i) if usage and i % 2 else None,
            cache_write_tokens=(50 + i) if usage and i % 4 == 1 else None,
            cache_write_1h_tokens=(20 + i) if usage and i % 8 == 1 else None,
            sources=[f"app/m{i % 4}.py", f"app/m{(i + 1) % 4}.py"][: i % 3],
            slice_symbols=5 if i % 4 == 0 else None, answer_symbols=3 if i % 4 == 0 else None,
            symbol_hits=2 if i % 4 == 0 else None, duration_ms=12.5 + i, session_id=session_id,
            compaction=i % 7 == 0, prefix_invalidated_tokens=300 if i % 7 == 0 else 0,
            miss_write_tokens=40 if i % 7 == 0 else 0, miss_input_tokens=20 if i % 14 == 0 else 0,
            cf_input_tokens=9_000 + i if usage and i % 2 == 0 else None,
            cf_cache_read_tokens=800 if usage and i % 2 == 0 else None,
            cf_cache_write_tokens=0 if usage and i % 2 == 0 else None,
            cf_cache_write_1h_tokens=0 if usage and i % 4 == 0 else None,
            user_label=("alice", "bob")[i % 2], host_label=("laptop-a", "ci-runner", "laptop-b")[i % 3]))
    return out


def write_sample(store) -> tuple[int, list[LedgerEntry]]:
    sid = ledger.start_session(store, T0, os.getpid(), address="http://127.0.0.1:1",
                               user_label="alice", host_label="laptop-a")
    entries = sample_entries(sid)
    ledger.record(store, entries[:20])                 # the recorder's thread: whole rows
    pending = entries[20:]
    for e in pending:                                  # completion: written before the counts
        e.counted = False
        ledger.insert(store, e)
    for e in pending[:-3]:
        e.counted = True
    ledger.complete(store, pending[:-3])               # three rows never get their counts
    return sid, entries


def comparable(totals) -> dict:
    """ModelTotals keyed by their group, floats rounded (the engines sum in their own order)."""
    out = {}
    for t in totals:
        d = asdict(t)
        key = (d.pop("provider"), d.pop("model"), d.pop("day"), d.pop("label"))
        out[key] = {k: round(v, 6) if isinstance(v, float) else v for k, v in d.items()}
    return out


def test_rows_sessions_and_sums_are_the_same_on_both_backends(tmp_path, pg_url):
    from memstrata.storage.postgres import PgStore

    results = []
    for store in (Store(tmp_path / "index.db"), PgStore(pg_url, "same")):
        with store:
            sid, _ = write_sample(store)
            ledger.end_session(store, sid, T0 + 10 * DAY)
            rows = [asdict(e) for e in ledger.entries(store, limit=1000)]
            for r in rows:
                r.pop("id")
            results.append({
                "rows": rows,
                "count": ledger.count(store), "uncounted": ledger.count(store, uncounted=True),
                "totals": comparable(ledger.totals(store)),
                "window": comparable(ledger.totals(store, T0 + DAY, T0 + 5 * DAY)),
                "by_day": comparable(ledger.totals(store, by_day=True)),
                "by_user": comparable(ledger.totals(store, by_label="user")),
                "by_host": comparable(ledger.totals(store, by_label="host")),
                "none": ledger.totals(store, session_ids=[]),
                "top": ledger.top_sources(store, limit=10),
                "sessions": [(s.started, s.ended, s.pid, s.kind, s.address, s.crashed, s.user_label, s.host_label)
                             for s in ledger.sessions(store)],
            })
    sqlite, pg = results
    assert sqlite["count"] == 48 and sqlite["uncounted"] == 3
    assert sqlite["none"] == [] and len(sqlite["by_day"]) > len(sqlite["totals"]) > 1
    assert {k[3] for k in sqlite["by_user"]} == {"alice", "bob"}
    assert sqlite["top"][0][1] > 0
    for key in sqlite:
        assert pg[key] == sqlite[key], key


def test_insert_then_complete_keeps_every_row_and_its_labels(open_store):
    store = open_store()
    sid, entries = write_sample(store)
    got = ledger.entries(store, limit=1000, session_ids=[sid])
    assert [e.id for e in got] == [e.id for e in entries] and len(set(e.id for e in got)) == 48
    assert [(e.user_label, e.host_label) for e in got] == [(e.user_label, e.host_label) for e in entries]
    assert sum(not e.counted for e in got) == 3
    s = ledger.session(store, sid)
    assert (s.user_label, s.host_label, s.running) == ("alice", "laptop-a", True)
    by_user = {t.label: t for t in ledger.totals(store, by_label="user") if t.model == "gpt-4o"}
    ok = [e for e in entries if e.model == "gpt-4o" and e.status and 200 <= e.status < 300]
    for user in ("alice", "bob"):
        mine = [e for e in ok if e.user_label == user]
        assert by_user[user].ok_requests == len(mine)
        assert by_user[user].tokens_saved == sum(e.tokens_saved for e in mine if e.counted)
    with pytest.raises(ValueError):
        ledger.totals(store, by_label="password")


def test_estimate_split_adds_up_to_the_tokens_saved(open_store):
    """saved_fresh + saved_read + saved_write is each accepted row's tokens saved, on either engine
    (the PostgreSQL sums must not truncate to integers or overflow int4)."""
    store = open_store()
    big = [LedgerEntry(time=T0 + i, endpoint="e", provider="openai", model="gpt-4o", status=200,
                       tokens_original=900_000, tokens_forwarded=100_000, input_tokens=150_000 + i,
                       cache_read_tokens=700_000, cache_write_tokens=3) for i in range(3)]
    ledger.record(store, big)
    (t,) = ledger.totals(store)
    assert t.tokens_saved == 3 * 800_000
    assert math.isclose(t.saved_fresh + t.saved_read + t.saved_write, t.tokens_saved, rel_tol=1e-9)


RECORDER = textwrap.dedent("""
    import os, sys, time
    from memstrata.storage import Store, ledger
    target, project = sys.argv[1], sys.argv[2]
    if target.startswith("postgresql"):
        from memstrata.storage.postgres import PgStore
        store = PgStore(target, project)
    else:
        store = Store(target)
    sid = ledger.start_session(store, time.time(), os.getpid(), user_label="carol", host_label="h")
    ledger.insert(store, ledger.LedgerEntry(time=time.time(), endpoint="e", tokens_original=10,
                                            tokens_forwarded=10, status=200, session_id=sid, user_label="carol"))
    print(sid, flush=True)
    time.sleep(600)
""")


def test_a_killed_recorder_is_seen_as_crashed_and_leaves_no_lock(open_store, tmp_path):
    store = open_store("crash")
    target = str(store.path) if open_store.backend == "sqlite" else store.url
    proc = subprocess.Popen([sys.executable, "-c", RECORDER, target, "crash"], stdout=subprocess.PIPE, text=True)
    try:
        sid = int(proc.stdout.readline())
        assert [s.id for s in ledger.running_sessions(store)] == [sid]
        assert ledger.close_dead_sessions(store) == []       # alive: left alone
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    # The server notices the dropped connection a moment after the kill.
    deadline = time.monotonic() + 30
    while ledger.running_sessions(store) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ledger.running_sessions(store) == []
    mine = ledger.start_session(store, time.time(), os.getpid())
    dead = ledger.session(store, sid)
    assert dead.crashed and dead.ended is not None
    assert ledger.count(store) == 1                           # its row survived the kill
    if open_store.backend == "postgresql":
        assert not store.locked_elsewhere(ledger.ServerSessionLocks.name(sid))
    ledger.end_session(store, mine, time.time())
    assert ledger.running_sessions(store) == [] and not ledger.session(store, mine).crashed
