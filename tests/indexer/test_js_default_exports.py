"""A JavaScript/TypeScript module whose default export is a name (`export
default toRem`) exports that name's definition: its own or one it imported,
followed through `export { default as x } from` and further hops."""

from __future__ import annotations

import pytest

from memstrata.indexer.parse import parse_source

from ..conftest import indexed_workspace

FILES = {
    "src/utils/size.ts": "export function toRem(px: number): string {\n  return `${px / 16}rem`\n}\n",
    "src/utils/index.ts": "import { toRem } from './size'\nexport default toRem\n",
    "src/use.ts": "import rem from './utils'\nexport function a(): string {\n  return rem(1)\n}\n",
    "src/preset.ts": "export function presetMini(): number {\n  return 1\n}\nexport default presetMini\n",
    "src/index.ts": "export { default as miniAlias } from './preset'\n",
    "src/facade.ts": "export { miniAlias as mini } from './index'\n",
    "src/app.ts": "import { miniAlias } from './index'\nimport presetMini from './preset'\nimport { mini } from './facade'\n"
                  "export function build(): number {\n  return miniAlias() + presetMini() + mini()\n}\n",
    # Namesakes, so only the exports (not a project-unique name) can decide.
    "src/legacy.ts": "export function toRem(): string {\n  return ''\n}\n"
                     "export function presetMini(): number {\n  return 0\n}\n",
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    w = indexed_workspace(tmp_path_factory.mktemp("defaults"), FILES)
    yield w
    w.close()


def test_a_default_export_of_an_imported_name_reaches_its_definition(ws):
    assert ws.graph.callees("src/use.ts::a") == ["src/utils/size.ts::toRem"]


def test_a_default_export_of_a_local_name_through_re_exports(ws):
    assert ws.graph.callees("src/app.ts::build") == ["src/preset.ts::presetMini"]


def test_the_exported_name_is_recorded_as_the_modules_default():
    result = parse_source("m.ts", "typescript", b"import { toRem } from './size'\nexport default toRem\n")
    assert [(r.receiver, r.name, r.kind, r.scope) for r in result.refs] == [
        ("default", "toRem", "bind", None), (None, "toRem", "export", None)]


def test_exporting_a_name_is_a_use_of_it():
    # `export default toRem` and `export { a, b as c }` (no `from`) use names the module has;
    # `export { x } from './x'` is an import, not a use.
    src = b"import { toRem } from './size'\nfunction a() {}\nconst b = 1\nexport { a, b as c }\nexport { x } from './x'\nexport default toRem\n"
    for language in ("typescript", "javascript"):
        refs = parse_source("m.ts", language, src).refs
        assert sorted((r.name, r.kind, r.line) for r in refs if r.kind == "export") == [
            ("a", "export", 4), ("b", "export", 4), ("toRem", "export", 6)]


def test_a_module_exporting_an_imported_name_as_its_default_refers_to_it(ws):
    # the re-exporting module is a user of the definition, so an importer of its default
    # reaches the definition through it in the graph
    users = {n.node for n in ws.graph.neighbors("src/utils/size.ts::toRem", ("references",), "in")}
    assert "src/utils/index.ts" in users


ANONYMOUS = {
    "src/createApp.js": "// Make an app.\nexport default function () {\n  return { routes: [] }\n}\n",
    "src/use-counter.ts": "export default (start: number) => {\n  return start + 1\n}\n",
    "src/Store.js": "export default class {\n  get(key) {\n    return key\n  }\n}\n",
    "src/main.ts": "import createApp from './createApp'\nimport useCounter from './use-counter'\n"
                   "import Store from './Store'\n"
                   "export function boot(): number {\n  createApp()\n  new Store()\n  return useCounter(1)\n}\n",
}


@pytest.mark.parametrize("language,path,src,expected", [
    ("javascript", "lib/createApp.js", b"export default function () {}\n", ("createApp", "function")),
    ("javascript", "lib/gen.mjs", b"export default function* () { yield 1 }\n", ("gen", "function")),
    ("typescript", "lib/use-counter.ts", b"export default (n: number) => n + 1\n", ("use_counter", "function")),
    ("tsx", "lib/Button.tsx", b"export default function () {\n  return <button/>\n}\n", ("Button", "function")),
    ("javascript", "lib/Store.js", b"export default class {\n  get() {}\n}\n", ("Store", "class")),
    ("typescript", "lib/x.ts", b"export default function named() {}\n", ("named", "function")),
    # An index file's default is imported by its folder's name (`import Button from './Button'`).
    ("tsx", "src/Button/index.tsx", b"export default () => <button/>\n", ("Button", "function")),
    ("javascript", "index.js", b"export default function () {}\n", ("index", "function")),
])
def test_an_anonymous_default_export_is_a_definition_named_after_its_file(language, path, src, expected):
    # As `module.exports = function () {}` is: an importer names the module's default after
    # the file far more often than anything else, and the function must have a name to be
    # shown, outlined and found at all.
    symbols = parse_source(path, language, src).symbols
    assert (symbols[0].name, symbols[0].kind) == expected
    assert symbols[0].signature.startswith("export default")
    assert symbols[0].start_line == 1 and symbols[0].parent is None


def test_importers_of_an_anonymous_default_reach_it(tmp_path):
    w = indexed_workspace(tmp_path / "p", ANONYMOUS)
    with w:
        g = w.graph
        assert "src/createApp.js::createApp" in g and "src/Store.js::Store.get" in g
        assert sorted(g.callees("src/main.ts::boot")) == [
            "src/Store.js::Store", "src/createApp.js::createApp", "src/use-counter.ts::use_counter"]
