"""A re-read of an edited file whose earlier read was cut on arrival (over the whole-result limit):
the runs it shares with what that cut showed become pointers to those lines, nothing else does.

Real parts: a generated project indexed for real, real tree-sitter parses and token counts, the
proxy's Compressor with the default safe settings.
"""

import re

import pytest

from memstrata.compressor.tokens import count_tokens
from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor
from memstrata.harness.proxy.gutter import unpad_gutter
from memstrata.indexer.workspace import Workspace

from .test_compress_request import Agent, cat_n, forwarded, result_text

LEDGER = "billing/ledger.py"
COUNT = 140
TASK = "Why does `settle_invoice_70` book a partial payment twice when the currency differs?"
POINTER = re.compile(r"\s*\[memstrata: lines (\d+)-(\d+) are lines (\d+)-(\d+) of the earlier read of "
                     r"\S*billing/ledger\.py \(tool use toolu_01\), unchanged\]$")


def _settle(k: int) -> str:
    return (f"def settle_invoice_{k}(invoice, payments, rates, ledger):\n"
            f'    """Settle invoice family {k}: convert each payment, book it once, close when paid."""\n'
            f"    due_{k} = invoice.total - invoice.paid\n"
            f"    for payment in payments:\n"
            f"        amount = payment.amount\n"
            f"        if payment.currency != invoice.currency:\n"
            f"            amount = amount * rates[(payment.currency, invoice.currency)] * {1 + k / 1000}\n"
            f"        if payment.id in ledger.booked_{k}:\n"
            f"            continue\n"
            f"        ledger.book_{k}(invoice.id, payment.id, amount)\n"
            f"        due_{k} -= amount\n"
            f"        if due_{k} <= {k % 5}:\n"
            f"            invoice.close(reason='settled-{k}')\n"
            f"            break\n"
            f"    return due_{k}\n")


def ledger_text() -> str:
    return '"""Invoice settlement, one routine per invoice family."""\n\n\n' + "\n\n".join(
        _settle(k) for k in range(COUNT))


@pytest.fixture(scope="module")
def billing_ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("billing") / "billing_project"
    (root / "billing").mkdir(parents=True)
    (root / "billing" / "__init__.py").write_text("")
    (root / LEDGER).write_text(ledger_text())
    ws = Workspace.open(root)
    ws.index()
    yield ws
    ws.close()


def numbered(text: str) -> dict[int, str]:
    """File line number -> the numbered line as shown, for every numbered line of a forwarded form."""
    out = {}
    for ln in text.split("\n"):
        m = re.match(r"^ *(\d+)→", ln)
        if m:
            out[int(m.group(1))] = ln
    return out


def test_reread_of_a_cut_read_points_only_at_lines_the_cut_showed(billing_ws):
    original = ledger_text()
    assert count_tokens(cat_n(original, arrow=True)) > 2 * CompressionSettings().result_cap
    comp = Compressor(billing_ws, CompressionSettings.for_mode("safe"))
    agent = Agent(billing_ws, TASK)
    first_body = agent.read(LEDGER)
    first = result_text(forwarded(comp.compress(first_body, "anthropic"), first_body)[2])
    assert "elided" in first and len(first) < len(result_text(first_body["messages"][2]))  # cut on arrival

    # The agent fixes settle_invoice_70 (a line added) and reads the file again.
    old = "        if payment.id in ledger.booked_70:\n"
    edited = original.replace(old, "        if payment.id in ledger.booked_70 or payment.pending:\n")
    edited = edited.replace("    due_70 = invoice.total - invoice.paid\n",
                            "    due_70 = invoice.total - invoice.paid\n    seen = set()\n")
    assert edited != original
    body = agent.read(LEDGER, edited)
    msgs = forwarded(comp.compress(body, "anthropic"), body)
    assert result_text(msgs[2]) == first                       # the cut read keeps its form
    form = result_text(msgs[4])
    pointers = [POINTER.match(ln) for ln in form.split("\n")]
    assert any(pointers), form[:2000]                          # pointers to the earlier cut read

    # Every pointed-at line is in the first forwarded form, verbatim, and is the re-read's line.
    shown_first = numbered(first)
    now = unpad_gutter(cat_n(edited, arrow=True)).split("\n")
    expanded = []
    for ln, m in zip(form.split("\n"), pointers):
        if m is None:
            expanded.append(ln)
            continue
        a, b, c, d = map(int, m.groups())
        assert b - a == d - c
        for k in range(b - a + 1):
            assert c + k in shown_first                        # never a line behind the cut's markers
            earlier_line = shown_first[c + k].split("→", 1)[1]
            assert earlier_line == now[a + k - 1].split("→", 1)[1]
            expanded.append(f"{a + k}→{earlier_line}")
    # Expanded, the re-read shows each of its lines with its number, in order, as the file has it now.
    shown_now = numbered("\n".join(expanded))
    assert list(shown_now) == sorted(shown_now)
    assert all(line == now[n - 1] for n, line in shown_now.items())

    # The edited function, the one the task names, is in the re-read itself, whole.
    start = edited.split("\n").index("def settle_invoice_70(invoice, payments, rates, ledger):")
    size = _settle(70).count("\n") + 1
    assert "\n".join(now[start:start + size]) in form
    # The pointers are what saves: the re-read costs less than the same cut without them.
    assert count_tokens(form) < 0.8 * count_tokens(first)

    # A later request forwards both reads exactly as before (prefix stability).
    agent.say("Pending payments are skipped now.", "Good. Does settle_invoice_71 have the same problem?")
    later_body = agent.read("billing/__init__.py")
    later = forwarded(comp.compress(later_body, "anthropic"), later_body)
    assert result_text(later[2]) == first and result_text(later[4]) == form


def test_a_likely_reread_under_the_likely_limit_is_not_cut_because_an_earlier_read_was(billing_ws):
    """The file shrank between two reads: the first read was over every limit and was cut; the
    re-read is over the whole-result limit but under the likely-file limit, and the question names
    a function in it.  It is treated as it would be without the earlier read: whole (its runs
    shared with what the cut showed may still become pointers), never cut at the whole-result
    limit."""
    original = ledger_text()
    settings = CompressionSettings.for_mode("safe", likely_cap=30_000)
    assert count_tokens(cat_n(original, arrow=True)) > settings.likely_cap
    comp = Compressor(billing_ws, settings)
    agent = Agent(billing_ws, TASK)
    first_body = agent.read(LEDGER)
    first = result_text(forwarded(comp.compress(first_body, "anthropic"), first_body)[2])
    assert "elided" in first                                   # over the likely-file limit: cut

    kept = 110
    smaller = '"""Invoice settlement, one routine per invoice family."""\n\n\n' + "\n\n".join(
        _settle(k) for k in range(kept))
    smaller = smaller.replace("    due_70 = invoice.total - invoice.paid\n",
                              "    due_70 = invoice.total - invoice.paid\n    seen = set()\n")
    size = count_tokens(cat_n(smaller, arrow=True))
    assert settings.result_cap < size < settings.likely_cap
    body = agent.read(LEDGER, smaller)
    form = result_text(forwarded(comp.compress(body, "anthropic"), body)[4])
    assert "elided" not in form, form[:1500]
    # Every function of the re-read is there: in the re-read itself or behind a pointer.
    shown = set(numbered(form))
    for m in (POINTER.match(ln) for ln in form.split("\n")):
        if m:
            shown.update(range(int(m.group(1)), int(m.group(2)) + 1))
    lines = smaller.split("\n")
    for k in range(kept):
        assert lines.index(f"def settle_invoice_{k}(invoice, payments, rates, ledger):") + 1 in shown, k
