"""Monorepo imports that bench/resolution.py found unresolved on real
workspaces: member crates whose Cargo.toml holds arrays, Cargo integration
tests, tsconfig "paths" patterns that contain "*/", and re-export chains
running package to package deeper than three barrels."""

from __future__ import annotations

import json

import pytest

from memstrata.indexer.watcher import Changes
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def targets(ws) -> dict[tuple[str, str, str | None], str | None]:
    return {(p, m, n): t for p, m, n, _a, _l, t in ci.load_imports(ws.store)}


@pytest.fixture(scope="module")
def cargo(tmp_path_factory):
    root = tmp_path_factory.mktemp("cargo")
    write(root, "Cargo.toml", '[workspace]\nmembers = ["core", "web"]\n')
    # An array before `name` (as most published crates have): the table
    # does not end at its "[".
    write(root, "core/Cargo.toml", '[package]\ncategories = ["web", "net"]\nkeywords = ["a"]\n'
                                   'name = "demo-core"\nversion = "0.1.0"\n\n[dependencies]\nserde = "1"\n')
    write(root, "core/src/lib.rs", "pub mod body;\n")
    write(root, "core/src/body.rs", "pub struct Body;\n\nimpl Body {\n    pub fn empty() -> Body { Body }\n}\n")
    write(root, "web/Cargo.toml", '[package]\nname = "web"\nversion = "0.1.0"\n')
    write(root, "web/src/lib.rs", "use demo_core::body::Body;\n\npub fn make() -> Body {\n    Body::empty()\n}\n")
    # A Cargo integration test: a crate of its own rooted at the file.
    write(root, "core/tests/roundtrip.rs", "mod common;\nuse demo_core::body::Body;\n\n"
                                           "#[test]\nfn works() {\n    common::setup();\n    Body::empty();\n}\n")
    write(root, "core/tests/common/mod.rs", "pub fn setup() {}\n")
    with Workspace.open(root) as ws:
        ws.index()
        yield ws


def test_member_crate_with_arrays_in_its_package_table_resolves(cargo):
    assert targets(cargo)[("web/src/lib.rs", "demo_core::body", "Body")] == "core/src/body.rs"
    assert "core/src/body.rs::Body.empty" in cargo.graph.callees("web/src/lib.rs::make")


def test_integration_tests_reach_their_crate_and_their_own_modules(cargo):
    t = targets(cargo)
    assert t[("core/tests/roundtrip.rs", "demo_core::body", "Body")] == "core/src/body.rs"
    assert t[("core/tests/roundtrip.rs", "self::common", None)] == "core/tests/common/mod.rs"


@pytest.fixture(scope="module")
def ts_mono(tmp_path_factory):
    root = tmp_path_factory.mktemp("tsmono")
    write(root, "package.json", json.dumps({"name": "root", "private": True}))
    # "packages/*/src" holds "*/": not a comment's end inside a string.
    write(root, "tsconfig.json", '{\n  /* shared settings */\n  "compilerOptions": {\n'
                                 '    "paths": {"@k/*": ["./packages/*/src"], "kit": ["./packages/kit/src"]},\n'
                                 '  },\n}\n')
    # Each package's manifest points at build output only: the tsconfig
    # paths are what leads to the source.
    for pkg in ("kit", "dom", "core", "state"):
        write(root, f"packages/{pkg}/package.json", json.dumps({"name": f"@k/{pkg}", "main": "index.js"}))
        write(root, f"packages/{pkg}/index.js", "module.exports = require('./dist/bundle.js')\n")
    write(root, "packages/kit/src/index.ts", "export * from './runtime'\n")
    write(root, "packages/kit/src/runtime.ts", "export * from '@k/dom'\n")
    write(root, "packages/dom/src/index.ts", "export * from '@k/core'\n")
    write(root, "packages/core/src/index.ts", "export { ref } from '@k/state'\n")
    write(root, "packages/state/src/index.ts", "export { ref } from './ref'\n")
    write(root, "packages/state/src/ref.ts", "export function ref(v: number): number {\n  return v\n}\n")
    write(root, "app/main.ts", "import { ref } from 'kit'\n\nexport function main(): number {\n  return ref(1)\n}\n")
    # Another `ref`, so only the import (not a project-unique name) can decide.
    write(root, "app/legacy.ts", "export function ref(v: number): number {\n  return -v\n}\n")
    # The same depth within one package, by relative barrels only.
    for i in range(1, 5):
        write(root, f"lib/b{i}.ts", f"export * from './b{i + 1}'\n")
    write(root, "lib/b5.ts", "export { format as fmt } from './impl'\n")
    write(root, "lib/impl.ts", "export function format(): string {\n  return ''\n}\n")
    write(root, "lib/other.ts", "export function format(): string {\n  return '-'\n}\n")
    write(root, "lib/use.ts", "import { fmt } from './b1'\n\nexport function show(): string {\n  return fmt()\n}\n")
    with Workspace.open(root) as ws:
        ws.index()
        yield ws


def test_tsconfig_paths_with_star_slash_resolve_to_source(ts_mono):
    t = targets(ts_mono)
    assert t[("app/main.ts", "kit", "ref")] == "packages/kit/src/index.ts"
    assert t[("packages/kit/src/runtime.ts", "@k/dom", "*")] == "packages/dom/src/index.ts"


def test_a_re_export_chain_across_five_barrels_reaches_the_definition(ts_mono):
    # kit/index -> kit/runtime -> dom -> core -> state/index -> state/ref
    assert "packages/state/src/ref.ts::ref" in ts_mono.graph.callees("app/main.ts::main")


def test_a_relative_barrel_chain_five_deep_reaches_the_renamed_definition(ts_mono):
    assert ts_mono.graph.callees("lib/use.ts::show") == ["lib/impl.ts::format"]


@pytest.fixture(scope="module")
def ts_apps(tmp_path_factory):
    """Apps that each map aliases in their own tsconfig, as tsc reads it:
    the nearest config above a file, through `extends`, with `baseUrl` and
    `paths` relative to the config that declares them."""
    root = tmp_path_factory.mktemp("tsapps")
    write(root, "tsconfig.json", '{"compilerOptions": {"paths": {"@shared/*": ["./shared/*"]}}}')
    write(root, "shared/fmt.ts", "export function fmt(): string {\n  return ''\n}\n")
    write(root, "tools/build.ts", "import { fmt } from '@shared/fmt'\n")  # no nearer config: the root's
    write(root, "apps/web/tsconfig.json",
          '{"extends": "../../tsconfig.json", "compilerOptions": {"baseUrl": ".", "paths": {"@/*": ["./src/*"]}}}')
    write(root, "apps/web/src/lib/cart.ts", "export function cartTotal(): number {\n  return 0\n}\n")
    write(root, "apps/web/src/page.ts", "import { cartTotal } from '@/lib/cart'\n")
    # `paths` inherited from a sibling config, without baseUrl: relative to that config.
    write(root, "apps/admin/tsconfig.json", '{"extends": "./tsconfig.app.json"}')
    write(root, "apps/admin/tsconfig.app.json", '{"compilerOptions": {"paths": {"~/*": ["./app/*"]}}}')
    write(root, "apps/admin/app/util.ts", "export function util(): number {\n  return 1\n}\n")
    write(root, "apps/admin/app/routes/home.ts", "import { util } from '~/util'\n")
    # A config that extends a workspace package linked under node_modules.
    write(root, "packages/tsconfig/base.json", '{"compilerOptions": {"baseUrl": "../../apps/site/src"}}')
    (root / "node_modules/@acme").mkdir(parents=True)
    (root / "node_modules/@acme/tsconfig").symlink_to(root / "packages/tsconfig", target_is_directory=True)
    write(root, "apps/site/tsconfig.json", '{"extends": "@acme/tsconfig/base.json"}')
    write(root, "apps/site/src/theme.ts", "export const theme = 1\n")
    write(root, "apps/site/src/pages/index.ts", "import { theme } from 'theme'\n")
    with Workspace.open(root) as ws:
        ws.index()
        yield ws


def test_each_file_resolves_through_its_nearest_tsconfig(ts_apps):
    t = targets(ts_apps)
    assert t[("apps/web/src/page.ts", "@/lib/cart", "cartTotal")] == "apps/web/src/lib/cart.ts"
    assert t[("apps/admin/app/routes/home.ts", "~/util", "util")] == "apps/admin/app/util.ts"
    assert t[("apps/site/src/pages/index.ts", "theme", "theme")] == "apps/site/src/theme.ts"
    assert t[("tools/build.ts", "@shared/fmt", "fmt")] == "shared/fmt.ts"


def test_an_edited_tsconfig_moves_the_imports_it_maps(tmp_path):
    """A tsconfig names no source file to parse, but an edit of its `paths` moves where imports
    point: an update that names it re-resolves them, as a full run would."""
    write(tmp_path, "tsconfig.json", '{"compilerOptions": {"baseUrl": ".", "paths": {"@/*": ["./v1/*"]}}}')
    for version in ("v1", "v2"):
        write(tmp_path, f"{version}/price.ts", f"export function price(): number {{\n  return 1\n}}\n")
    write(tmp_path, "app/main.ts", "import { price } from '@/price'\n\nexport function main(): number {\n"
                                   "  return price()\n}\n")
    with Workspace.open(tmp_path) as ws:
        ws.index()
        assert targets(ws)[("app/main.ts", "@/price", "price")] == "v1/price.ts"
        assert ws.graph.callees("app/main.ts::main") == ["v1/price.ts::price"]
        write(tmp_path, "tsconfig.json", '{"compilerOptions": {"baseUrl": ".", "paths": {"@/*": ["./v2/*"]}}}')
        ws.apply_changes(Changes({"tsconfig.json"}, set()))  # as the watcher hands it over
        assert targets(ws)[("app/main.ts", "@/price", "price")] == "v2/price.ts"
        assert ws.graph.callees("app/main.ts::main") == ["v2/price.ts::price"]
        # A catch-up run finds the same when the edit came while nothing watched.
        write(tmp_path, "tsconfig.json", '{"compilerOptions": {"baseUrl": ".", "paths": {"@/*": ["./v1/*"]}}}')
        ws.index()
        assert targets(ws)[("app/main.ts", "@/price", "price")] == "v1/price.ts"
        assert ws.graph.callees("app/main.ts::main") == ["v1/price.ts::price"]


def test_a_reader_follows_imports_another_process_re_pointed_after_a_tsconfig_edit(tmp_path):
    """A long-running reader (the daemon, an MCP server) holds a graph when another process's
    `memstrata index` re-resolves the imports of a tsconfig edit, no source file changed: its
    next answer is the one a process started now gives."""
    write(tmp_path, "tsconfig.json", '{"compilerOptions": {"baseUrl": ".", "paths": {"lib": ["v1/price.ts"]}}}')
    for version in ("v1", "v2"):
        write(tmp_path, f"{version}/price.ts", "export function price(): number {\n  return 1\n}\n")
    write(tmp_path, "app/main.ts", "import { price } from 'lib'\n\nexport function main(): number {\n"
                                   "  return price()\n}\n")
    with Workspace.open(tmp_path) as writer:
        writer.index()
    with Workspace.open(tmp_path) as reader:
        assert reader.graph.callees("app/main.ts::main") == ["v1/price.ts::price"]
        write(tmp_path, "tsconfig.json", '{"compilerOptions": {"baseUrl": ".", "paths": {"lib": ["v2/price.ts"]}}}')
        with Workspace.open(tmp_path) as writer:
            summary = writer.index()
            assert summary.parsed == 0
        assert reader.graph.callees("app/main.ts::main") == ["v2/price.ts::price"]
        assert reader.graph_in_step().callees("app/main.ts::main") == ["v2/price.ts::price"]
