"""A question about what a module exports shows the barrel's `export ... from` lines: a package's
entry file that only re-exports defines nothing the ranking could reach."""

from __future__ import annotations

import pytest

from memstrata.compressor import context_query
from memstrata.compressor.slice import speaks_of_exports

from ..conftest import indexed_workspace

_MODULES = {f"packages/store-core/src/part{k}.ts": (f"export function part{k}Value(value: number): number {{\n"
                                                    f"  return value * {k} + {k}\n}}\n")
            for k in range(30)}
FILES = {
    "packages/store-core/src/hydration.ts": (
        "export function dehydrate(client: Client): State {\n  return collect(client)\n}\n\n"
        "export function dehydrateEntry(entry: Entry): Snapshot {\n  return { key: entry.key, data: entry.data }\n}\n\n"
        "export function hydrate(client: Client, state: State): void {\n  client.restore(state)\n}\n"),
    **_MODULES,
    "packages/store-core/src/index.ts": (
        "".join(f"export {{ part{k}Value }} from './part{k}'\n" for k in range(15))
        + "export {\n  dehydrate,\n  hydrate,\n} from './hydration'\n"
        + "".join(f"export {{ part{k}Value }} from './part{k}'\n" for k in range(15, 30))),
    "packages/store-core/src/client.ts": (
        "import { dehydrate } from './hydration'\n\n"
        "export function snapshot(client: Client): State {\n  return dehydrate(client)\n}\n"),
}


@pytest.mark.parametrize("query, asks", [
    ("perf: skip no-op callbacks and export dehydrateEntry", True),
    ("Re-export the hydration types", True),
    ("Remove `url` from public options objects", True),
    ("expose the cache size", True),
    ("serve files from the public directory", False),
    ("fix dehydrateEntry for empty entries", False),
])
def test_which_questions_speak_of_exports(query, asks):
    assert speaks_of_exports(query) is asks


def test_the_barrel_re_exporting_the_target_is_shown_when_the_question_speaks_of_exports(tmp_path):
    with indexed_workspace(tmp_path / "ws", FILES) as w:
        barrel = "packages/store-core/src/index.ts"
        sl = context_query(w, "skip no-op callbacks and export `dehydrateEntry`", max_tokens=1000)
        assert "packages/store-core/src/hydration.ts" in sl.sources
        assert barrel in sl.sources, sl.sources
        # The statement re-exporting the target's module, whole.
        assert "export {\n  dehydrate,\n  hydrate,\n} from './hydration'" in sl.context
        assert not any(s.startswith(barrel) for s in sl.symbols + sl.full_symbols)
        assert sl.tokens <= 1000
        # A question that does not speak of exports is answered without it.
        plain = context_query(w, "skip no-op callbacks in `dehydrateEntry`", max_tokens=1000)
        assert barrel not in plain.sources


@pytest.mark.parametrize("budget", [30, 60, 120, 200])
def test_a_budget_too_small_for_the_re_export_lines_still_answers(tmp_path, budget):
    with indexed_workspace(tmp_path / "ws", FILES) as w:
        sl = context_query(w, "export `dehydrateEntry` and `hydrate`", max_tokens=budget)
        assert sl.tokens <= budget
