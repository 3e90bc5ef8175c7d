"""Numbered reads go without the padding before their line numbers: lossless, a sixth fewer tokens."""

from __future__ import annotations

import re
from pathlib import Path

import anthropic

from memstrata.compressor.tokens import count_tokens
from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor
from memstrata.harness.proxy.forward import ProxyConfig
from memstrata.harness.proxy.gutter import unpad_gutter, unpad_gutter_counted
from memstrata.harness.proxy.token_counts import TextCounts
from memstrata.storage import ledger
from tests.stub_provider import ServerThread

from .test_compress_request import QUESTION, Agent, cat_n, forwarded, read, result_text
from .test_proxy_compression import stub  # noqa: F401 - the stand-in provider, a fixture


def test_unpad_gutter_removes_only_the_padding_before_line_numbers():
    assert unpad_gutter("     1→import os\n     2→\n    10→def f():") == "1→import os\n2→\n10→def f():"
    assert unpad_gutter("     9\tx = 1\n    10\t    return 12") == "9\tx = 1\n10\t    return 12"
    # the code after the separator is never touched, even where it looks like a numbered line itself
    assert unpad_gutter("     7\t     8\ty") == "7\t     8\ty"
    # lines carrying no number: elision markers, pointers, indented code of an unnumbered text
    untouched = ("    # [memstrata: lines 40-90 of a.py elided: f, g]\n"
                 "[memstrata: lines 1-9 are lines 1-9 of the earlier read of a.py (tool use t1), unchanged]\n"
                 "    return 12 + x\n  12 apples")
    assert unpad_gutter(untouched) == untouched
    assert unpad_gutter("") == ""


def test_unpadding_matches_a_line_by_line_reference():
    """The padding is found after line breaks and at the text's start apart (see .gutter): the
    same text and the same token saving as taking every line on its own, on texts that start or
    end anywhere, with one-space paddings, lone line breaks and lines that only look numbered."""
    import random

    number = re.compile(r"( +)(?=\d{1,7}(?:→|\t))")

    def reference(text):
        out, saved = [], 0
        for line in text.split("\n"):
            m = number.match(line)
            if m:
                saved += 1 if len(m.group(1)) == 1 else 2
                line = line[m.end():]
            out.append(line)
        return "\n".join(out), saved

    pieces = ["     1\tx", " 12345\ty", "  7→a", " 8→", "    x", " ", "", "\t", "  12345678\tno", " 9 \tno",
              "10\tten", "      \u0663\tarabic", "   3\t   4\tz", "\r", "  5\t\r"]
    rng = random.Random(11)
    for _ in range(4000):
        text = "\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))
        if rng.random() < 0.3:
            text = text[rng.randint(0, len(text)):]
        assert unpad_gutter_counted(text) == reference(text), text
        assert unpad_gutter(text) == reference(text)[0]


def _numbered(text: str, sep: str, first: int = 1, width: int = 6) -> str:
    return "\n".join(f"{n:>{width}}{sep}{line}" for n, line in enumerate(text.split("\n"), first))


def test_the_paddings_tokens_are_what_the_encoder_counts():
    """The unpadded read's count is worked out from the padded one's, without encoding it again:
    it must be the encoder's own count, on real files and on lines made to tempt the tokenizer
    into merging across the padding (trailing spaces, carriage returns, empty lines, digits and
    tabs in the code, a text that starts with a padded number, numbers of one to seven digits)."""
    repo = Path(__file__).resolve().parents[2]
    texts = []
    for path in sorted((repo / "harness" / "proxy").glob("*.py"))[:12] + sorted((repo / "fixtures").rglob("*.py"))[:20]:
        code = path.read_text(encoding="utf-8")
        texts += [_numbered(code, "\t"), _numbered(code, "→"), _numbered(code, "→", first=995, width=5)]
    odd = ["x  ", "", "\r", "  12\tnot a number of ours", "\t\tindented", "日本語 ", "    ", "9", "→", "a\r"]
    texts += ["\n".join(f"{n:>{w}}{sep}{line}" for n, line in enumerate(odd * 3, start))
              for w in (1, 6, 7) for sep in ("\t", "→") for start in (1, 98, 99_990)]
    for text in texts:
        bare, padding = unpad_gutter_counted(text)
        assert count_tokens(unpad_gutter(text)) == count_tokens(text) - padding
        assert bare == unpad_gutter(text)
        # The proxy's memo counts a numbered text from its unpadded form: still the encoder's count.
        counts = TextCounts()
        assert counts.count(text) == count_tokens(text)
        assert counts.count(unpad_gutter(text)) == count_tokens(unpad_gutter(text))


def test_a_read_kept_whole_goes_without_its_numbers_padding(shop_ws):
    """Safe keeps a small read whole: every line, number and separator is forwarded, only the
    alignment goes; the request counts as changed (fewer tokens), with no piece cut."""
    agent = Agent(shop_ws, QUESTION)
    body = agent.read("shop/pricing.py")
    sent_read = result_text(body["messages"][-1])
    res = Compressor(shop_ws, CompressionSettings.for_mode("safe")).compress(body, "anthropic")
    out = result_text(forwarded(res, body)[-1])
    assert out == unpad_gutter(sent_read) != sent_read
    assert [ln.split("→", 1) for ln in out.split("\n")] == \
        [[n.strip(), code] for n, code in (ln.split("→", 1) for ln in sent_read.split("\n"))]
    assert count_tokens(out) < 0.9 * count_tokens(sent_read)
    assert res.runs == 0 and res.sources == [] and res.slice_symbols == []
    assert (res.replaced_tokens, res.replacement_tokens) == (count_tokens(sent_read), count_tokens(out))


def test_without_unpadding_a_whole_read_goes_as_sent(shop_ws):
    agent = Agent(shop_ws, QUESTION)
    body = agent.read("shop/pricing.py")
    res = Compressor(shop_ws, CompressionSettings.for_mode("safe", unpad_gutter=False)).compress(body, "anthropic")
    assert res.body is None


def test_a_cut_read_and_a_pointer_to_it_both_go_unpadded(shop_ws):
    """Aggressive cuts the read on arrival; the kept lines lose their padding, the markers stay; a
    re-read points at the lines the unpadded cut shows, and nothing of the prefix moves."""
    settings = CompressionSettings.for_mode("aggressive", min_tokens=400, result_cap=800, likely_file=0.0)
    comp = Compressor(shop_ws, settings)
    agent = Agent(shop_ws, QUESTION)
    first = agent.read("shop/orders.py")
    cut = result_text(forwarded(comp.compress(first, "anthropic"), first)[-1])
    assert "[memstrata: lines " in cut
    numbered = [ln for ln in cut.split("\n") if "→" in ln and ln.split("→", 1)[0].strip().isdigit()]
    assert numbered and all(not ln.startswith(" ") for ln in numbered)
    padded = cat_n(read(shop_ws, "shop/orders.py"), arrow=True).split("\n")
    assert set(numbered) <= {ln.lstrip(" ") for ln in padded}
    agent.read("shop/pricing.py")
    again = agent.read("shop/orders.py")
    msgs = forwarded(comp.compress(again, "anthropic"), again)
    assert result_text(msgs[2]) == cut
    reread = result_text(msgs[6])
    pointers = re.findall(r"\[memstrata: lines (\d+)-(\d+) are lines \1-\2 of the earlier read of ", reread)
    shown = {int(ln.split("→", 1)[0]) for ln in numbered}
    assert pointers and all(set(range(int(a), int(b) + 1)) <= shown for a, b in pointers)
    assert len(reread) < len(cut)


def test_through_the_proxy_the_ledger_counts_the_padding_saved(shop_ws, stub):  # noqa: F811
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False,
                      compression=CompressionSettings.for_mode("safe"))
    app = build_app(shop_ws, HarnessConfig(proxy=cfg, mount_mcp=False))
    agent = Agent(shop_ws, QUESTION)
    body = agent.read("shop/pricing.py")
    with ServerThread(app) as server:
        client = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key="sk-test-gutter", max_retries=0)
        client.messages.create(**body)
        app.state.harness.flush()
    received = stub.received[-1].json()["messages"][-1]["content"][0]["content"]
    assert received == unpad_gutter(result_text(body["messages"][-1]))
    row = max(ledger.entries(shop_ws.store, limit=1000), key=lambda e: e.time)
    assert row.endpoint == "anthropic.messages" and row.status == 200 and row.compressed
    assert row.tokens_saved == row.tokens_original - row.tokens_forwarded > 0
    assert row.sources == [] and row.answer_symbols is None  # nothing was cut: no recall to measure
