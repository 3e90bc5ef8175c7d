"""The counterfactual bill when the saving is small against the bill: a long conversation that is
mostly cache reads, where a compaction step's savings are a few percent of the whole.  Per-block
framing (tokens a provider adds around every block, the same in the request as sent and as
forwarded) must not be scaled with the compressed texts, or the reported saving drifts off the
true difference by the compression ratio times the framing."""

import time

import httpx
import pytest

from memstrata.harness.proxy.analysis import Answer
from memstrata.harness.proxy.compress_request import CompressionResult
from memstrata.harness.proxy.counterfactual import ANTHROPIC_FAMILY, FramingEstimate, ShadowCache
from memstrata.harness.proxy.recorder import Counting
from tests.caching_provider import ANTHROPIC_RATES, CachingProvider
from tests.stub_provider import ServerThread

MARK = {"type": "ephemeral"}
MODEL = "claude-sonnet-4-6"


def code(n: int) -> str:
    return "\n".join(f"{i:>6}\tdef handler_{n}_{i}(request, value={i}):\n        return request.send(value)"
                     for i in range(1, 40))


def sessions(turns: int = 30, compact_at: int = 10):
    """(as sent, as forwarded) per turn: Claude Code's breakpoints; at ``compact_at`` the reads of the
    first eight turns are replaced by one-line pointers, and stay so (prefix stability)."""
    msgs: list = []
    for turn in range(turns):
        tid = f"toolu_{turn:03d}"
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": f"Reading part {turn}."},
                                                      {"type": "tool_use", "id": tid, "name": "Read",
                                                       "input": {"file_path": f"/p/m{turn}.py"}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": code(turn)}]})
        sent = [{"role": "user", "content": [{"type": "text", "text": "Fix the handlers."}]}, *msgs]
        fwd = [m if turn < compact_at or k == 0 or k > 16 else
               {**m, "content": [{**p, "content": f"[lines 1-39 of m{(k - 1) // 2}.py elided]"}
                                 if p["type"] == "tool_result" else p for p in m["content"]]}
               for k, m in enumerate(sent)]
        yield tuple({"model": MODEL, "max_tokens": 512,
                     "system": [{"type": "text", "text": "You are a coding agent. " * 60, "cache_control": MARK}],
                     "messages": [*ms[:-1], {**ms[-1], "content": [{**ms[-1]["content"][-1], "cache_control": MARK}]}]}
                    for ms in (sent, fwd))


@pytest.mark.parametrize("framing", [3, 12])
def test_small_saving_on_a_cached_conversation_is_reported_within_2_percent(framing):
    direct, through = CachingProvider(framing=framing), CachingProvider(framing=framing)
    estimate = FramingEstimate()
    # the same requests priced with the framing estimate ("new") and without it ("old", for contrast)
    ledgers = {"new": (ShadowCache(), estimate), "old": (ShadowCache(), None)}
    reported = {"new": 0.0, "old": 0.0}
    with ServerThread(direct.app) as d, ServerThread(through.app) as t:
        for sent, fwd in sessions():
            httpx.post(d.url + "/v1/messages", json=sent).raise_for_status()
            u = httpx.post(t.url + "/v1/messages", json=fwd).json()["usage"]
            ans = Answer(input_tokens=u["input_tokens"], cache_read_tokens=u["cache_read_input_tokens"],
                         cache_write_tokens=u["cache_creation_input_tokens"])
            comp = CompressionResult(body=fwd if fwd != sent else None, reason="test")
            proxied = (u["input_tokens"] * 3.0 + u["cache_read_input_tokens"] * 0.3
                       + u["cache_creation_input_tokens"] * 3.75) / 1e6
            now = time.time()
            for kind, (shadow, est) in ledgers.items():
                c = Counting(sent, comp, "anthropic", shadow=shadow, family=ANTHROPIC_FAMILY, model=MODEL,
                             arrived=now, framing=est)
                c.run()
                i, r, w, _ = c.counterfactual_usage(ans)
                reported[kind] += (i * 3.0 + r * 0.3 + w * 3.75) / 1e6 - proxied
    prompt_only = {**ANTHROPIC_RATES, "output": 0.0}
    true_saving = direct.total(prompt_only) - through.total(prompt_only)
    assert 0 < true_saving < 0.2 * direct.total(prompt_only)  # the shape that exposes a bias
    assert estimate.per_block(("anthropic", MODEL)) == pytest.approx(framing, abs=0.5)
    assert abs(reported["new"] - true_saving) <= 0.02 * true_saving
    # scaling the framing with the texts overstates the saving: the bug this test guards against
    assert reported["old"] - true_saving > 0.02 * true_saving


def test_framing_estimate_needs_a_determined_fit():
    est = FramingEstimate()
    est.observe("k", 1000, 10, 1220)
    assert est.per_block("k") == 0.0          # one request: texts and blocks cannot be told apart
    est.observe("k", 2000, 20, 2440)
    assert est.per_block("k") == 0.0          # texts grew in step with blocks: still undetermined
    for t, b in ((5000, 12), (9000, 40), (20000, 41), (21000, 90)):
        est.observe("k", t, b, round(1.15 * t + 7 * b))
    assert est.per_block("k") == pytest.approx(7, abs=0.2)
    est.observe("other", 1000, 10, 1_000)
    est.observe("other", 1000, 90, 5_000)
    assert est.per_block("other") == 32.0     # bounded: never more framing than a block plausibly carries


def test_images_beside_the_texts_do_not_inflate_the_saving():
    """A provider bills an image by its pixels, the same sent or forwarded: the saving of a request
    holding images is the removed texts at the provider's text ratio, not the whole reported
    prompt scaled by the texts' compression."""
    from memstrata.harness.proxy.counterfactual import NO_CACHE, TextRatio
    from memstrata.harness.proxy.recorder import prompt_tokens

    ratio, per_image = 1.2, 1600
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    learnt = TextRatio()
    saved = []
    for images in (0, 10, 0, 10):
        sent = {"model": MODEL, "max_tokens": 50, "messages": [
            {"role": "user", "content": [*[image] * images, {"type": "text", "text": code(1) * 3}]}]}
        fwd = {**sent, "messages": [{"role": "user",
                                     "content": [*[image] * images, {"type": "text", "text": code(1)}]}]}
        c = Counting(sent, CompressionResult(body=fwd, reason="test"), "anthropic", shadow=ShadowCache(),
                     family=NO_CACHE, model=MODEL, text_ratio=learnt)
        c.run()
        billed = round(prompt_tokens(fwd, "anthropic") * ratio) + per_image * images
        i, r, w, _ = c.counterfactual_usage(Answer(input_tokens=billed, cache_read_tokens=0, cache_write_tokens=0))
        saved.append(i + r + w - billed)
    removed = round((prompt_tokens(sent, "anthropic") - prompt_tokens(fwd, "anthropic")) * ratio)
    assert saved == [pytest.approx(removed, rel=0.01)] * 4, saved
