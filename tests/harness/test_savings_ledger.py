import json
from datetime import datetime, timezone

import pytest

from memstrata.harness.proxy.providers import Providers, ProvidersError, providers_path
from memstrata.harness.proxy.savings import SUMMARY_FIELDS, cycle_start, savings_report, savings_summary
from memstrata.indexer.workspace import Workspace
from memstrata.storage import Store, ledger
from memstrata.storage.ledger import LedgerEntry


def ts(y, m, d, h=12):
    return datetime(y, m, d, h, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "index.db")
    yield s
    s.close()


def entry(t, model="gpt-4o", provider="openai", orig=1000, fwd=400, status=200, **kw):
    return LedgerEntry(time=t, endpoint="openai.chat", provider=provider, model=model,
                       tokens_original=orig, tokens_forwarded=fwd, status=status, compressed=orig != fwd, **kw)


def test_empty_ledger_reports_zeros_and_nulls(tmp_path):
    with Workspace.open(tmp_path) as ws:
        s = savings_summary(ws, since=0.0)
    assert tuple(s) == SUMMARY_FIELDS
    assert s == {
        "session_tokens_saved": 0, "session_dollar_saved": 0.0, "cycle_tokens_saved": 0,
        "cycle_dollar_saved": 0.0, "provider_rate_per_token": None, "recall": None, "precision": None,
    }


def test_session_and_cycle_windows_and_prices(store):
    now = ts(2025, 3, 20)
    ledger.record(store, [
        entry(ts(2025, 2, 27), orig=5000, fwd=1000),             # last cycle: ignored
        entry(ts(2025, 3, 2), orig=3000, fwd=1000),              # this cycle, before the session
        entry(ts(2025, 3, 20, 10), orig=1000, fwd=400),          # session
        entry(ts(2025, 3, 20, 11), orig=1000, fwd=400, status=429),  # refused: saved nothing
        entry(ts(2025, 3, 20, 11), model="claude-3-7-sonnet-20250219", provider="anthropic",
              orig=2000, fwd=1000),
    ])
    rep = savings_report(store, since=ts(2025, 3, 20, 9), now=now, providers=Providers.defaults())
    s = rep.summary()
    assert s["session_tokens_saved"] == 600 + 1000
    assert s["session_dollar_saved"] == pytest.approx(600 * 2.5e-6 + 1000 * 3e-6)
    assert s["cycle_tokens_saved"] == 2000 + 600 + 1000
    assert s["cycle_dollar_saved"] == pytest.approx(2600 * 2.5e-6 + 1000 * 3e-6)
    assert s["provider_rate_per_token"] == pytest.approx(2.5e-6)  # gpt-4o: most requests
    assert s["recall"] is None and s["precision"] is None
    assert rep.session.requests == 3 and rep.session.ok_requests == 2


def test_unknown_model_counts_tokens_not_dollars(store):
    ledger.record(store, [entry(100.0, model="mystery-1", provider="openai", orig=900, fwd=300)])
    s = savings_report(store, since=0, now=200.0, providers=Providers.defaults()).summary()
    assert s["session_tokens_saved"] == 600
    assert s["session_dollar_saved"] is None
    assert s["provider_rate_per_token"] is None


def test_recall_precision_micro_averaged(store):
    ledger.record(store, [
        entry(10.0, slice_symbols=4, answer_symbols=2, symbol_hits=2),
        entry(11.0, slice_symbols=6, answer_symbols=3, symbol_hits=1),
        entry(12.0),  # not measured
    ])
    s = savings_report(store, since=0, now=20.0, providers=Providers.defaults()).summary()
    assert s["recall"] == pytest.approx(3 / 5, abs=1e-4)
    assert s["precision"] == pytest.approx(3 / 10, abs=1e-4)


@pytest.mark.parametrize("now,day,expected", [
    (ts(2025, 3, 20), 1, ts(2025, 3, 1, 0)),
    (ts(2025, 3, 10), 15, ts(2025, 2, 15, 0)),
    (ts(2025, 3, 15), 15, ts(2025, 3, 15, 0)),
    (ts(2025, 3, 1), 31, ts(2025, 2, 28, 0)),   # clamped to February's length
    (ts(2025, 1, 5), 10, ts(2024, 12, 10, 0)),
])
def test_cycle_start(now, day, expected):
    assert cycle_start(now, day) == expected


def test_sessions_table(store):
    sid = ledger.start_session(store, 50.0, pid=123)
    assert ledger.latest_session(store) == (sid, 50.0, None)
    ledger.end_session(store, sid, 60.0)
    assert ledger.latest_session(store) == (sid, 50.0, 60.0)
    ledger.record(store, [entry(55.0, session_id=sid, sources=["a.py"])])
    (e,) = ledger.entries(store)
    assert e.session_id == sid and e.sources == ["a.py"] and e.tokens_saved == 600


# -- providers.json ------------------------------------------------------------


def test_defaults_written_on_first_run(memstrata_home):
    p = Providers.load()
    assert providers_path() == memstrata_home / "providers.json"
    data = json.loads(providers_path().read_text())
    assert data["providers"]["openai"]["models"]["gpt-4o"] == {
        "input_cost_per_mtok": 2.5, "output_cost_per_mtok": 10.0,
        "cache_read_cost_per_mtok": 1.25, "cache_write_cost_per_mtok": 2.5}
    assert p.rate("gpt-4o", "openai").input_per_token == pytest.approx(2.5e-6)
    claude = p.rate("claude-sonnet-4-5", "anthropic")
    assert (claude.cache_read_cost_per_mtok, claude.cache_write_cost_per_mtok) == (0.30, 3.75)


def test_rate_lookup_order():
    p = Providers.defaults()
    assert p.rate("claude-3-7-sonnet-20250219", "openai").provider == "anthropic"  # exact, any provider
    assert p.rate("claude-sonnet-4-20250514", "anthropic").model_key == "claude-sonnet-4*"
    assert p.rate("llama3", "ollama").input_cost_per_mtok == 0.0
    assert p.rate("llama3", "openai") is None   # ollama's '*' does not price other endpoints
    assert p.rate(None) is None


def test_later_models_of_a_family_are_priced_at_their_own_rates():
    p = Providers.defaults()
    assert p.rate("claude-opus-4-1", "anthropic").input_cost_per_mtok == 15.0
    for model in ("claude-opus-4-6", "claude-opus-4-8-20260528", "claude-opus-5"):
        assert p.rate(model, "anthropic").input_cost_per_mtok == 5.0, model
    assert p.rate("claude-opus-5-5", "anthropic").cache_read_cost_per_mtok == 0.20
    assert p.rate("gpt-5-codex", "openai").cache_read_cost_per_mtok == 0.125
    # A variant priced apart is not caught by a neighbour's name: it stays unpriced.
    assert p.rate("gpt-5-pro", "openai") is None


def test_a_file_of_an_earlier_release_still_prices_models_shipped_since(memstrata_home):
    """A providers.json written with older defaults: a model it has no entry for is priced at
    the shipped rate, and a shipped entry more specific than the file's broad pattern wins; the
    file's exact names and its provider `*` still stand."""
    providers_path().parent.mkdir(parents=True, exist_ok=True)
    providers_path().write_text(json.dumps({"providers": {
        "anthropic": {"models": {"claude-opus-4*": {"input_cost_per_mtok": 15.0, "output_cost_per_mtok": 75.0},
                                 "claude-opus-4-7": {"input_cost_per_mtok": 4.5, "output_cost_per_mtok": 20.0}}},
        "local": {"models": {"*": {"input_cost_per_mtok": 0.0, "output_cost_per_mtok": 0.0}}}}}))
    p = Providers.load()
    assert p.rate("claude-opus-4-1", "anthropic").input_cost_per_mtok == 15.0   # the file's pattern
    assert p.rate("claude-opus-4-6", "anthropic").input_cost_per_mtok == 5.0    # shipped, more specific
    assert p.rate("claude-opus-4-7", "anthropic").input_cost_per_mtok == 4.5    # the file's exact name
    assert p.rate("gpt-5", "openai").input_cost_per_mtok == 1.25                # not in the file at all
    assert p.rate("gpt-5", "local").input_cost_per_mtok == 0.0                  # the provider's own `*`


def test_set_rate_and_billing_day(memstrata_home):
    p = Providers.load()
    assert p.set_rate("gpt-4o", 3.0) == "openai"
    assert p.set_rate("claude-x", 1.25) == "anthropic"
    with pytest.raises(ProvidersError):
        p.set_rate("weird-model", 1.0)
    assert p.set_rate("weird-model", 1.0, provider="local") == "local"
    with pytest.raises(ProvidersError):
        p.set_rate("gpt-4o", -1)
    p.set_billing_day(15)
    p.save()
    q = Providers.load()
    assert q.rate("gpt-4o", "openai").input_cost_per_mtok == 3.0
    assert q.rate("claude-x", "anthropic").input_cost_per_mtok == 1.25
    assert q.billing_cycle_start_day == 15


def test_one_hour_cache_write_rate_listed_derived_and_set(memstrata_home):
    """Anthropic bills a write to its 1-hour cache at 2x the input rate: the shipped Claude entries
    list it, an Anthropic entry without it derives it, another provider has no such writes (its
    cache-write rate stands), and `set_rate` files it like the other cache rates."""
    shipped = Providers.defaults()
    for model, rate in (("claude-sonnet-4-5", 6.0), ("claude-opus-4-1", 30.0), ("claude-3-5-haiku-1", 1.6)):
        r = shipped.rate(model, "anthropic")
        assert (r.cache_write_1h_cost_per_mtok, r.cache_write_1h_listed) == (rate, True), model
        assert r.cache_write_1h_per_token == pytest.approx(rate / 1e6)
    assert all("cache_write_1h_cost_per_mtok" in m for m in shipped.data["providers"]["anthropic"]["models"].values())
    assert "cache_write_1h_cost_per_mtok" not in shipped.data["providers"]["openai"]["models"]["gpt-4o"]
    gpt = shipped.rate("gpt-4o", "openai")
    assert gpt.cache_write_1h_cost_per_mtok == gpt.cache_write_cost_per_mtok == 2.5
    # A file of an earlier release lists no 1-hour rate: derived from the input rate.
    providers_path().parent.mkdir(parents=True, exist_ok=True)
    providers_path().write_text(json.dumps({"providers": {"anthropic": {"models": {
        "claude-sonnet-4*": {"input_cost_per_mtok": 3.0, "output_cost_per_mtok": 15.0,
                             "cache_read_cost_per_mtok": 0.3, "cache_write_cost_per_mtok": 3.75}}}}}))
    p = Providers.load()
    old = p.rate("claude-sonnet-4-5", "anthropic")
    assert (old.cache_write_1h_cost_per_mtok, old.cache_write_1h_listed, old.cache_rates_listed) == (6.0, False, True)
    p.set_rate("claude-sonnet-4*", 3.0, cache_write_1h=5.5)
    p.save()
    assert Providers.load().rate("claude-sonnet-4-5", "anthropic").cache_write_1h_cost_per_mtok == 5.5
    with pytest.raises(ProvidersError, match="rate must be"):
        p.set_rate("claude-sonnet-4*", 3.0, cache_write_1h=-1)
    providers_path().write_text(json.dumps({"providers": {"anthropic": {"models": {
        "claude-x": {"input_cost_per_mtok": 3.0, "cache_write_1h_cost_per_mtok": "6"}}}}}))
    with pytest.raises(ProvidersError, match="cache_write_1h_cost_per_mtok"):
        Providers.load()


def test_invalid_file_is_a_clear_error(memstrata_home):
    memstrata_home.mkdir(parents=True)
    (memstrata_home / "providers.json").write_text("{not json")
    with pytest.raises(ProvidersError, match="not valid JSON"):
        Providers.load()
    (memstrata_home / "providers.json").write_text('{"providers": {"x": {"models": {"m": {"input_cost_per_mtok": "a"}}}}}')
    with pytest.raises(ProvidersError, match="input_cost_per_mtok"):
        Providers.load()


def test_report_lines_when_no_measured_answer_named_a_project_symbol(store):
    # A measured answer that names no project symbol leaves recall undefined (null);
    # `memstrata savings` printed it with a format spec and died with a traceback.
    from memstrata.harness.cli.savings import report_lines

    ledger.record(store, [entry(10.0, slice_symbols=3, answer_symbols=0, symbol_hits=0)])
    rep = savings_report(store, now=20.0, providers=Providers.defaults())
    assert rep.cycle.measured == 1 and rep.cycle.recall is None and rep.cycle.precision == 0.0
    (line,) = [x for x in report_lines(rep, None) if "answers:" in x]
    assert "recall n/a, precision 0.00 over 1 measured" in line


def test_report_says_how_many_writes_went_to_the_one_hour_cache(store):
    from memstrata.harness.cli.savings import _window_lines

    ledger.record(store, [entry(ts(2025, 3, 20, 10), model="claude-sonnet-4-6", provider="anthropic",
                                input_tokens=100, cache_read_tokens=0, cache_write_tokens=2000,
                                cache_write_1h_tokens=1500, output_tokens=10)])
    w = savings_report(store, since=ts(2025, 3, 20, 9), now=ts(2025, 3, 20), providers=Providers.defaults()).session
    assert (w.cache_write_tokens, w.cache_write_1h_tokens) == (2000, 1500)
    assert w.dollar_spent == pytest.approx((100 * 3.0 + 500 * 3.75 + 1500 * 6.0 + 10 * 15.0) / 1e6)
    assert any("2,000 cache write (1,500 of them 1-hour)" in line for line in _window_lines(w, answers=False))
