"""A JavaScript/TypeScript monorepo: workspace packages imported by name,
tsconfig "paths" aliases, and barrel files that re-export (`export * from`,
`export { x } from`) all resolve to the definition."""

from __future__ import annotations

import json

import pytest

from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture(scope="module")
def mono(tmp_path_factory):
    root = tmp_path_factory.mktemp("mono")
    write(root, "package.json", json.dumps({"name": "acme", "private": True, "workspaces": ["packages/*"]}))
    write(root, "tsconfig.json", """{
      // comments and trailing commas, as tsconfig allows
      "compilerOptions": {"baseUrl": ".", "paths": {"@lib/*": ["packages/lib/src/*"],},},
    }""")
    # A package whose entry points at build output that is never indexed.
    write(root, "packages/shared/package.json", json.dumps({"name": "@acme/shared", "main": "dist/index.js",
                                                             "types": "dist/index.d.ts"}))
    write(root, "packages/shared/src/index.ts", "export * from './math'\nexport { format as fmt } from './text'\n")
    write(root, "packages/shared/src/math.ts", "export function add(a: number, b: number): number {\n  return a + b\n}\n")
    write(root, "packages/shared/src/text.ts", "export function format(n: number): string {\n  return `${n}`\n}\n")
    write(root, "packages/shared/src/deep/clock.ts", "export function tick(): number {\n  return 1\n}\n")
    # A package whose build mirrors a nested source tree: `dist/node/index.js` is built from
    # `src/node/index.ts`, and there is no `src/index.ts`.
    write(root, "packages/tool/package.json", json.dumps({"name": "tool", "exports": {".": "./dist/node/index.js"}}))
    write(root, "packages/tool/src/node/index.ts", "export { defineConfig } from './config'\n")
    write(root, "packages/tool/src/node/config.ts", "export function defineConfig(c: object): object {\n  return c\n}\n")
    write(root, "packages/lib/src/util.ts", "export function helper(): number {\n  return 2\n}\n")
    write(root, "packages/app/package.json", json.dumps({"name": "@acme/app", "main": "src/main.ts"}))
    write(root, "packages/app/src/main.ts",
          "import { add, fmt } from '@acme/shared'\n"
          "import { tick } from '@acme/shared/deep/clock'\n"
          "import { helper } from '@lib/util'\n"
          "import { defineConfig } from 'tool'\n"
          "export function run(): string {\n  return fmt(add(helper(), tick()))\n}\n"
          "export function configure(): object {\n  return defineConfig({})\n}\n")
    with Workspace.open(root) as ws:
        ws.index()
        yield ws


def test_bare_specifiers_resolve_inside_the_workspace(mono):
    targets = {(p, m): t for p, m, _n, _a, _l, t in ci.load_imports(mono.store)}
    assert targets[("packages/app/src/main.ts", "@acme/shared")] == "packages/shared/src/index.ts"
    assert targets[("packages/app/src/main.ts", "@acme/shared/deep/clock")] == "packages/shared/src/deep/clock.ts"
    assert targets[("packages/app/src/main.ts", "@lib/util")] == "packages/lib/src/util.ts"
    assert targets[("packages/app/src/main.ts", "tool")] == "packages/tool/src/node/index.ts"


def test_calls_through_barrel_files_reach_the_definitions(mono):
    callees = set(mono.graph.callees("packages/app/src/main.ts::run"))
    assert {
        "packages/shared/src/math.ts::add",       # export * from './math'
        "packages/shared/src/text.ts::format",    # export { format as fmt } from './text'
        "packages/shared/src/deep/clock.ts::tick",
        "packages/lib/src/util.ts::helper",
    } <= callees
    assert "packages/tool/src/node/config.ts::defineConfig" in set(mono.graph.callees("packages/app/src/main.ts::configure"))
