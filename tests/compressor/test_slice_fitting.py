"""What the slice spends outside the code it selects (import lines), how
selection accounts for it, and what fitting gives up first when the text
runs over the budget."""

from __future__ import annotations

import textwrap

import pytest

from memstrata.compressor import context_query
from memstrata.compressor import slice as slice_mod
from memstrata.compressor.render import FULL, SIG, unit_for
from memstrata.indexer.workspace import Workspace

N_MODULES = 10


def _module(i: int) -> str:
    # Every module imports one name a line from every other module, as
    # projects formatted with one import per line do.
    imports = "".join(f"from m{j} import helper_{j}\n" for j in range(N_MODULES) if j != i)
    imports += "".join(f"from m{j} import extra_{j}\n" for j in range(N_MODULES) if j != i)
    body = textwrap.dedent(f"""
        def helper_{i}(payload):
            \"\"\"Ledger reconciliation step {i} for the payload.\"\"\"
            total = payload.get("ledger_{i}", 0)
            total += helper_{(i + 1) % N_MODULES}(payload)
            return total * {i + 1}


        def extra_{i}(payload):
            \"\"\"Ledger audit step {i}.\"\"\"
            return helper_{i}(payload) - {i}
        """)
    return imports + "\n" + body


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("fitting") / "proj"
    root.mkdir()
    for i in range(N_MODULES):
        (root / f"m{i}.py").write_text(_module(i))
    with Workspace.open(root) as w:
        w.index()
        yield w


def _section(context: str, path: str) -> list[str]:
    out, inside = [], False
    for line in context.split("\n"):
        if line.startswith("# ") and line[2:].strip().endswith(".py") and " " not in line[2:].strip():
            inside = line[2:].strip() == path
            continue
        if inside:
            out.append(line)
    return out


def test_one_import_line_says_a_dependency_on_another_shown_file(ws):
    sl = context_query(ws, "ledger reconciliation and audit steps", max_tokens=3000)
    assert len(sl.sources) >= 3
    for path in sl.sources:
        imports = [ln for ln in _section(sl.context, path) if ln.startswith("from ")]
        targets = [ln.split()[1] for ln in imports]
        # At most one line per other file of the slice, never a repeat.
        assert len(targets) == len(set(targets))
        assert set(targets) <= {p[:-3] for p in sl.sources if p != path}
    # The dependency is still said where there is one.
    assert any(ln.startswith("from ") for p in sl.sources for ln in _section(sl.context, p))


def test_selection_counts_the_import_lines_so_fitting_keeps_what_it_chose(ws, monkeypatch):
    chosen: list[int] = []
    real_select = slice_mod._select

    def recording_select(*args, **kwargs):
        units, used = real_select(*args, **kwargs)
        chosen.append(len(units))
        return units, used

    monkeypatch.setattr(slice_mod, "_select", recording_select)
    for budget in (700, 1200, 2000):
        chosen.clear()
        sl = context_query(ws, "ledger reconciliation and audit steps", max_tokens=budget)
        assert sl.tokens <= budget
        # The estimate held: the last selection is what the slice shows.
        assert len(sl.symbols) == chosen[-1], budget


def test_fitting_gives_up_what_selection_took_last(ws):
    graph = ws.graph
    docs = slice_mod._Docs(ws, graph)
    nodes = [f"m{i}.py::helper_{i}" for i in range(4)]
    docs.load([graph.file_of(n) for n in nodes])
    units = []
    for k, node in enumerate(nodes):
        # Scores say the opposite of the order selection took them in.
        u = unit_for(node, graph, score=float(k))
        u.mode, u.taken = (FULL if k < 3 else SIG), k + 1
        u.cost_full = u.cost_sig = 60
        units.append(u)
    shown = docs.shown(units)
    text, kept, _files, full = slice_mod._fit(graph, shown, units, 10_000)
    assert len(kept) == 4
    assert full == slice_mod.count_tokens(text)
    # Just too small for all four: the one taken last goes first, although it scores highest.
    text, kept, _files, tokens = slice_mod._fit(graph, shown, units, full - 5)
    assert [u.node for u in kept] == nodes[:3]
    assert tokens == slice_mod.count_tokens(text) <= full - 5
