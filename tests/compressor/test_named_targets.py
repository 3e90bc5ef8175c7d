"""Every symbol a question names is shown, at least as its signature, whenever
the budget can hold all their signatures: a body that would crowd one out is
shown as a signature instead, and another named one may be shown whole."""

from __future__ import annotations

import textwrap

import pytest

from memstrata.compressor import context_query
from memstrata.indexer.workspace import Workspace


def _long_function() -> str:
    steps = "\n".join(
        f"    entries[{i}] = normalise_entry(source.read_entry({i}), strict=strict, version={i})  # step {i}"
        for i in range(40))
    return textwrap.dedent('''\
        def normalise_entry(entry, strict=False, version=0):
            return entry

        def rebuild_catalog(source, strict=False):
            """Reads every entry of the source and writes the catalog anew."""
            entries = {}
        ''') + steps + "\n    return entries\n"


PLUGINS = textwrap.dedent('''\
    REGISTRY = {}


    def register_plugin(
        name: str,
        factory,
        *,
        priority: int = 0,
        replace_existing: bool = False,
        description: str | None = None,
    ):
        """Adds a plugin factory under ``name``."""
        if name in REGISTRY and not replace_existing:
            raise KeyError(name)
        REGISTRY[name] = (priority, factory, description)
        return factory
    ''')


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("named") / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "catalog.py").write_text(_long_function())
    (root / "pkg" / "plugins.py").write_text(PLUGINS)
    with Workspace.open(root) as ws:
        ws.index()
        yield ws


QUESTION = "`rebuild_catalog` + `register_plugin`"


def test_both_named_symbols_are_shown_at_every_budget_that_holds_their_signatures(ws):
    both_fit = None
    for budget in range(120, 1600, 15):
        r = context_query(ws, QUESTION, max_tokens=budget)
        names = {s.split("::", 1)[1] for s in r.symbols}
        if both_fit is None and {"rebuild_catalog", "register_plugin"} <= names:
            both_fit = budget
        if both_fit is not None:
            assert {"rebuild_catalog", "register_plugin"} <= names, (budget, r.symbols)
            assert r.tokens <= budget
    assert both_fit is not None and both_fit < 400
    # With room, both are whole.
    r = context_query(ws, QUESTION, max_tokens=4096)
    assert {"pkg/catalog.py::rebuild_catalog", "pkg/plugins.py::register_plugin"} <= set(r.full_symbols)
