"""A file the agent reads again after each edit: a re-read points at the latest read that shows each
unchanged line, so a change shown once is not shown again at every later re-read; and every pointer
in every forwarded request names lines its read still shows there, verbatim.

Real parts: a generated project indexed for real, real tree-sitter parses and token counts, the
proxy's Compressor (safe settings; compaction made eager so that steps happen in a short test).
"""

import re

import pytest

from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor
from memstrata.harness.proxy.gutter import unpad_gutter
from tests.conftest import indexed_workspace

from .test_compress_request import Agent, cat_n, forwarded

QUOTES = "quotes/pricing.py"
OTHER = "quotes/rounding.py"
TASK = "Make `quote_total_12` and `quote_total_44` ignore cancelled lines when they sum a quote."
POINTER = re.compile(r"^\s*\[memstrata: lines (\d+)-(\d+) are lines (\d+)-(\d+) of the earlier read of "
                     r"\S+ \(tool use (toolu_\d+)\), unchanged\]$")
NUMBERED = re.compile(r"^ *(\d+)→(.*)$")


def _quote(k: int) -> str:
    return (f"def quote_total_{k}(quote, catalogue, discounts):\n"
            f'    """Total of quote family {k}: each line priced from the catalogue, discounted once."""\n'
            f"    total_{k} = 0\n"
            f"    for line in quote.lines:\n"
            f"        price_{k} = catalogue.price(line.sku, family={k})\n"
            f"        if line.sku in discounts.get('family_{k}', ()):\n"
            f"            price_{k} = price_{k} * {1 - k / 1000}\n"
            f"        total_{k} += price_{k} * line.quantity\n"
            f"    if quote.minimum_{k} and total_{k} < quote.minimum_{k}:\n"
            f"        total_{k} = quote.minimum_{k}\n"
            f"    if quote.currency != catalogue.currency_{k}:\n"
            f"        total_{k} = catalogue.convert(total_{k}, quote.currency, family={k})\n"
            f"    return round(total_{k}, {k % 4})\n")


def pricing(count: int = 60) -> str:
    return '"""Quote totals, one routine per quote family."""\n\n\n' + "\n\n".join(_quote(k) for k in range(count))


def rounding() -> str:
    return '"""Rounding rules for quotes."""\n\n\n' + "\n\n".join(
        f"def round_family_{k}(value):\n    return round(value * {k + 1}, {k % 3}) / {k + 1}\n" for k in range(80))


def skip_cancelled(text: str, k: int) -> str:
    old = f"    for line in quote.lines:\n        price_{k} ="
    assert old in text
    return text.replace(old, f"    for line in quote.lines:\n        if line.cancelled:\n            continue\n"
                             f"        price_{k} =")


@pytest.fixture(scope="module")
def quotes_ws(tmp_path_factory):
    ws = indexed_workspace(tmp_path_factory.mktemp("quotes") / "quotes_project",
                           {"quotes/__init__.py": "", QUOTES: pricing(), OTHER: rounding()})
    yield ws
    ws.close()


def results(msgs: list[dict]) -> dict[str, str]:
    """tool use id -> the tool result's text, as forwarded."""
    out = {}
    for m in msgs:
        if isinstance(m.get("content"), list):
            for part in m["content"]:
                if part.get("type") == "tool_result":
                    out[part["tool_use_id"]] = part["content"]
    return out


def lines_shown(form: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in map(NUMBERED.match, form.split("\n")) if m}


def expand(form: str, shown_by: dict[str, str], name: str) -> list[str]:
    """``form`` with every pointer replaced by the lines it names, checked against the read it names
    as that read is forwarded in the same request: verbatim there, never behind a marker."""
    out = []
    for ln in form.split("\n"):
        m = POINTER.match(ln)
        if m is None:
            out.append(ln)
            continue
        a, b, c, d, tid = *map(int, m.groups()[:4]), m.group(5)
        assert b - a == d - c, ln
        assert tid in shown_by, f"{name}: a pointer names {tid}, which this request does not hold"
        there = lines_shown(shown_by[tid])
        for k in range(b - a + 1):
            assert c + k in there, f"{name}: line {c + k} of {tid} is not shown there ({ln})"
            out.append(f"{a + k}→{there[c + k]}")
    return out


def test_a_file_read_after_each_edit_shows_each_change_once(quotes_ws):
    comp = Compressor(quotes_ws, CompressionSettings.for_mode("safe"))
    agent = Agent(quotes_ws, TASK)
    v1 = pricing()
    agent.read(QUOTES, v1)
    v2 = skip_cancelled(v1, 12)
    agent.read(QUOTES, v2)
    v3 = skip_cancelled(v2, 44)
    body = agent.read(QUOTES, v3)
    msgs = forwarded(comp.compress(body, "anthropic"), body)
    got = results(msgs)
    second, third = got["toolu_02"], got["toolu_03"]
    # The second read shows its change (quote_total_12, whole) and points at the first for the rest.
    assert "if line.cancelled:" in second and "def quote_total_12(" in second
    # The third shows only the new change: quote_total_12's edit is pointed at in the second read,
    # the rest of the file in the first.
    named = {m.group(5) for m in map(POINTER.match, third.split("\n")) if m}
    assert named == {"toolu_01", "toolu_02"}, third[:3000]
    assert "def quote_total_44(" in third and third.count("if line.cancelled:") == 1
    assert "def quote_total_12(" not in third
    # Lossless: expanded, the third read is the file as it is now, every line with its number.
    now = unpad_gutter(cat_n(v3, arrow=True)).split("\n")
    assert expand(third, got, "third read") == now
    # Cheaper than pointing at the first read alone (which repeats quote_total_12 whole).
    single = Compressor(quotes_ws, CompressionSettings.for_mode("safe"))
    only_first = Agent(quotes_ws, TASK)
    only_first.read(QUOTES, v1)
    alone = only_first.read(QUOTES, v3)
    alone_form = results(forwarded(single.compress(alone, "anthropic"), alone))["toolu_02"]
    assert "def quote_total_12(" in alone_form and len(third) < len(alone_form)


def test_a_read_of_part_of_the_file_does_not_make_the_rest_count_as_changed(quotes_ws):
    """The whole file, then a range of it (Read with offset and limit), then the whole file after an
    edit: the last re-read shows the edited definition and points at the first read for the rest;
    the range read, latest as it is, holds nothing of the lines outside it, which are not changes."""
    comp = Compressor(quotes_ws, CompressionSettings.for_mode("safe"))
    agent = Agent(quotes_ws, TASK)
    v1 = pricing()
    agent.read(QUOTES, v1)
    agent.read(QUOTES, v1)
    lines = v1.split("\n")
    agent.messages[-1]["content"][0]["content"] = "\n".join(
        f"{n:>6}→{lines[n - 1]}" for n in range(300, 420))          # lines 300-419 only
    v2 = skip_cancelled(v1, 44)
    body = agent.read(QUOTES, v2)
    msgs = forwarded(comp.compress(body, "anthropic"), body)
    got = results(msgs)
    third = got["toolu_03"]
    assert "def quote_total_44(" in third and third.count("def quote_total_") == 1, third[:2000]
    assert expand(third, got, "third read") == unpad_gutter(cat_n(v2, arrow=True)).split("\n")


def test_the_current_tasks_pointers_name_lines_still_shown_through_compaction_steps(quotes_ws):
    """Two tasks, the file edited and read again in each, other files read in between; compaction
    made eager (no prompt cache, low trigger): in every forwarded request, every pointer of the
    current task's reads names lines that the reads it names show, verbatim, in that same request
    -- an earlier task's read they point into is held whole while they are recent, however many
    reads they point into.  (An earlier task's own pointers may outlive the copy they named: that
    task is over, and its reads are compacted like any other; docs/proxy.md, rule 3.)"""
    settings = CompressionSettings.for_mode("safe", trigger=2_000, clear_at_least=300, min_tokens=300)
    comp = Compressor(quotes_ws, settings)
    agent = Agent(quotes_ws, TASK)
    text = pricing()
    sent = []

    def step(body):
        msgs = forwarded(comp.compress(body, "anthropic"), body)
        sent.append(msgs)
        got = results(msgs)
        task_start = max(i for i, m in enumerate(body["messages"])
                         if m["role"] == "user" and m["content"][0]["type"] == "text")
        for tid, form in results(msgs[task_start:]).items():
            expand(form, got, f"request {len(sent)}, {tid}")

    step(agent.read(QUOTES, text))
    for k in (0, 44):
        text = skip_cancelled(text, k)
        step(agent.read(QUOTES, text))
    step(agent.read(OTHER, rounding()))
    step(agent.say("Both totals skip cancelled lines now.",
                   "Now do the same in `quote_total_7`, `quote_total_30` and `quote_total_51`."))
    # The new task's first read is the file again: it points into the first task's reads (the
    # first, whole, and the re-read that showed quote_total_0's change), which a step now compacts.
    for k in (7, 30, 51):
        text = skip_cancelled(text, k)
        step(agent.read(QUOTES, text))
        step(agent.read(OTHER, rounding()))
    first_of_task = results(sent[5])["toolu_05"]
    assert {m.group(5) for m in map(POINTER.match, first_of_task.split("\n")) if m} >= {"toolu_01", "toolu_02"}
    # The steps did change earlier forms (the check above ran through them), and the latest
    # read still expands to the file as it is now.
    assert any(a != b for msgs_a, msgs_b in zip(sent, sent[1:])
               for a, b in zip(results(msgs_a).values(), results(msgs_b).values()))
    latest = results(sent[-1])
    last_id = f"toolu_{agent.n - 1:02d}"           # the last read of the file (then the other file's)
    assert expand(latest[last_id], latest, "latest") == unpad_gutter(cat_n(text, arrow=True)).split("\n")
