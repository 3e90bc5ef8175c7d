"""Tool behaviour through the SDK's in-process client: savings wiring, refusals
while indexing or broken, and error messages that never leak outside paths."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client

from memstrata.indexer.workspace import Workspace
from .mcp_helpers import LOGIN_QUERY, text_of
from memstrata.mcp_server import IndexWarmup, build_server
from memstrata.mcp_server.schemas import SAVINGS_FIELDS


@pytest.fixture
def ws(project: Path):
    with Workspace.open(project) as w:
        yield w


def call(server, name: str, args: dict | None = None):
    async def main():
        async with Client(server, mode="legacy") as c:
            return await c.call_tool(name, args or {})

    return anyio.run(main)


def test_savings_come_from_the_injected_provider(ws):
    figures = {"session_tokens_saved": 1200, "session_dollar_saved": 0.0036, "cycle_tokens_saved": 5400,
               "cycle_dollar_saved": 0.0162, "provider_rate_per_token": 3e-06, "recall": 0.8, "precision": None}
    r = call(build_server(ws, savings=lambda: figures), "savings_summary")
    assert not r.is_error
    assert r.structured_content == figures
    assert tuple(r.structured_content) == SAVINGS_FIELDS


def test_savings_missing_figures_are_null_not_guessed(ws):
    r = call(build_server(ws, savings=lambda: {"session_tokens_saved": 0, "extra": 7}), "savings_summary")
    assert not r.is_error
    assert r.structured_content == {f: (0 if f == "session_tokens_saved" else None) for f in SAVINGS_FIELDS}


def test_savings_without_a_ledger_is_an_error(ws):
    r = call(build_server(ws), "savings_summary")
    assert r.is_error and "not tracked" in text_of(r)


def test_error_messages_do_not_name_paths_outside_the_project(ws, project: Path):
    def broken():
        raise OSError(f"cannot open /home/someone/.config/secret.json nor {project}/app/reports.py")

    r = call(build_server(ws, savings=broken), "savings_summary")
    assert r.is_error
    message = text_of(r)
    assert "/home/someone" not in message and "secret.json" not in message
    assert f"{project}/app/reports.py" in message  # inside the project is fine
    assert "Traceback" not in message


def test_context_query_waits_for_the_catch_up_and_refuses_politely(ws):
    gate = threading.Event()
    release_index = ws.index

    def slow_index(*a, **kw):
        gate.wait(30)
        return release_index(*a, **kw)

    ws.index = slow_index  # a catch-up that cannot finish until the test says so
    warmup = IndexWarmup(ws, watch=False)
    server = build_server(ws, warmup=warmup, ready_timeout=0.2)
    try:
        r = call(server, "context_query", {"query": LOGIN_QUERY})  # the session start begins the warm-up
        assert r.is_error and "still building the index" in text_of(r)
        r = call(server, "index_status")
        assert r.structured_content["status"] == "indexing"
    finally:
        gate.set()
    assert warmup.wait(30)
    r = call(server, "context_query", {"query": LOGIN_QUERY})
    assert not r.is_error and "def login" in r.structured_content["context"]
    assert call(server, "index_status").structured_content["status"] == "ready"


def test_failed_catch_up_reports_error_state(ws):
    def failing_run(*a, **kw):  # fault injection: the real Workspace.index records the failure
        raise OSError("disk on fire at /var/lib/secret")

    ws.indexer.index_all = failing_run
    warmup = IndexWarmup(ws, watch=False)
    server = build_server(ws, warmup=warmup)
    r = call(server, "context_query", {"query": LOGIN_QUERY})
    assert r.is_error
    assert "error state" in text_of(r) and "memstrata index" in text_of(r)
    assert "disk on fire" not in text_of(r) and "/var/lib" not in text_of(r)
    assert call(server, "index_status").structured_content["status"] == "error"


def test_unexpected_compressor_failure_is_a_clean_error(ws, monkeypatch):
    import memstrata.mcp_server.tools as tools

    def explode(*a, **kw):
        raise RuntimeError("internal detail at /usr/lib/python3/secret.py")

    monkeypatch.setattr(tools, "build_slice", explode)
    ws.index()
    r = call(build_server(ws), "context_query", {"query": LOGIN_QUERY})
    assert r.is_error
    assert "internal error (RuntimeError)" in text_of(r)
    assert "/usr/lib" not in text_of(r)


def test_an_index_damaged_under_the_server_is_reported_by_every_tool_with_its_remedy(project: Path):
    from memstrata.harness.proxy.savings import savings_summary

    with Workspace.open(project) as w:
        w.index()
        server = build_server(w, savings=lambda: savings_summary(w))
        db = project / ".memstrata" / "index.db"
        w.store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = db.stat().st_size
        with open(db, "r+b") as f:  # another program overwrites the file
            f.write(bytes(range(256)) * (size // 256))
        w.store.execute("PRAGMA shrink_memory")  # what the server had cached is read again from the file
        status = call(server, "index_status")
        assert not status.is_error and status.structured_content["status"] == "error"
        notes = status.content[1].text
        assert notes.startswith("note: The index of this project is unreadable") and "memstrata index" in notes
        for name, args in (("savings_summary", None), ("context_query", {"query": LOGIN_QUERY}),
                           ("find_symbol", {"name": "AuthService"}), ("file_outline", {"path": "app/routes.py"})):
            r = call(server, name, args)
            assert r.is_error and "is unreadable" in text_of(r) and "memstrata index" in text_of(r), text_of(r)
            assert "StoreCorrupt" not in text_of(r)


def test_errors_repeat_at_most_two_hundred_characters_of_an_argument(ws):
    # A caller's argument can be any length: an error names what it refuses without sending a
    # 100 KB argument back, and says how long it was.
    ws.index()
    server = build_server(ws)
    long = "x" * 100_000
    for name, args in [("file_outline", {"path": "src/" + long}), ("file_outline", {"path": "app", "depth": long}),
                       ("find_symbol", {"name": "login", "kind": long}),
                       ("find_symbol", {"name": "login", "path": long}),
                       ("context_query", {"query": "login", "max_tokens": long}), (long, {})]:
        r = call(server, name, args)
        message = text_of(r)
        assert r.is_error and len(message) < 600, (name[:20], message[:300])
        assert "characters)" in message and ("100,000" in message or "100,004" in message), message[:300]
