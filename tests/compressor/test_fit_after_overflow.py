"""When the exact count of a slice runs over what selection estimated, fitting
gives up a large body: the room that body held is not left empty."""

from __future__ import annotations

import textwrap

import pytest

from memstrata.compressor import context_query
from memstrata.compressor import slice as slice_mod
from memstrata.compressor.render import FULL, SIG, unit_for

from ..conftest import indexed_workspace


def _long_function() -> str:
    steps = "".join(f"    total += settle_step_{k}(batch, {k})\n" for k in range(70))
    return ("def settle_batch(batch):\n"
            '    """Settle every step of a batch of invoices."""\n'
            "    total = 0\n" + steps + "    return total\n")


def _small_module(i: int) -> str:
    return textwrap.dedent(f"""
        def invoice_step_{i}(batch):
            \"\"\"Invoice settlement step {i} for the batch.\"\"\"
            return len(batch) + {i}


        def invoice_audit_{i}(batch):
            \"\"\"Invoice audit step {i}.\"\"\"
            return invoice_step_{i}(batch) - {i}
        """)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    files = {"big.py": _long_function()}
    files.update({f"m{i}.py": _small_module(i) for i in range(24)})
    w = indexed_workspace(tmp_path_factory.mktemp("overflow") / "proj", files)
    yield w
    w.close()


def test_units_taken_after_a_body_that_overflows_are_kept_when_they_fit(ws):
    graph = ws.graph
    docs = slice_mod._Docs(ws, graph)
    nodes = ["m0.py::invoice_step_0", "big.py::settle_batch", "m1.py::invoice_step_1", "m2.py::invoice_audit_2"]
    docs.load([graph.file_of(n) for n in nodes])

    def units(big_mode: str):
        out = []
        for k, node in enumerate(nodes):
            u = unit_for(node, graph, score=1.0 / (k + 1))
            u.mode, u.taken = (big_mode if k == 1 else FULL if k < 3 else SIG), k + 1
            u.cost_full = u.cost_sig = 30
            out.append(u)
        return out

    shown = docs.shown(units(FULL))
    _text, _kept, _files, all_full = slice_mod._fit(graph, shown, units(FULL), 100_000)
    _text, _kept, _files, big_as_sig = slice_mod._fit(graph, shown, units(SIG), 100_000)
    assert big_as_sig < all_full - 200
    # Room for everything with the long body as its signature, not with the body itself: the body
    # comes down to its signature and the two units selection took after it stay.
    text, kept, _files, tokens = slice_mod._fit(graph, shown, units(FULL), big_as_sig + 5)
    assert [u.node for u in kept] == nodes
    assert {u.node: u.mode for u in kept}["big.py::settle_batch"] == SIG
    assert tokens == slice_mod.count_tokens(text) <= big_as_sig + 5


def test_a_body_fitting_cut_is_offered_again_as_its_signature_only(ws):
    # A refill after fitting cut a body selects for the room really left: that body, whose exact
    # text did not fit, is offered as a signature only, and its room goes to the next bodies.
    graph = ws.graph
    big = "big.py::settle_batch"
    ranked = [(big, 1.0)] + [(f"m{i}.py::invoice_step_{i}", 0.5) for i in range(12)]
    docs = slice_mod._Docs(ws, graph)
    docs.load(list(dict.fromkeys(graph.file_of(n) for n, _ in ranked)))
    named = {big}  # shown first, whole when it fits
    units, _ = slice_mod._select(graph, docs, ranked, 3000, named=named)
    assert {u.node: u.mode for u in units}[big] == FULL
    units, _ = slice_mod._select(graph, docs, ranked, 3000, no_full={big})
    modes = {u.node: u.mode for u in units}
    assert modes.get(big) in (SIG, None)
    assert sum(1 for n, m in modes.items() if n != big and m == FULL) >= 6
