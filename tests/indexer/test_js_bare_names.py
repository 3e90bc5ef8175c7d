"""A bare JavaScript/TypeScript identifier names a binding of its scope chain,
never a member: an object literal's property (whose qualname names no owner
when the object has no name) neither captures a bare call of its own name nor
makes that name ambiguous for the rest of the project."""

from __future__ import annotations

import pytest

from ..conftest import indexed_workspace

FILES = {
    "src/globals.ts": "function presetMini(o: number): number {\n  return o\n}\n",
    # An anonymous object's member, named like the function it calls.
    "src/runtime.ts": "export const registry: Record<string, unknown> = {}\n"
                      "Object.assign(registry, {\n  presetMini: (o: number) => presetMini(o),\n})\n",
    "src/app.ts": "export function build(): number {\n  return presetMini(2)\n}\n",
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    w = indexed_workspace(tmp_path_factory.mktemp("barenames"), FILES)
    yield w
    w.close()


def test_an_object_literal_member_does_not_capture_the_bare_call_in_its_body(ws):
    assert ws.graph.callees("src/runtime.ts::presetMini") == ["src/globals.ts::presetMini"]


def test_an_object_literal_member_leaves_a_bare_name_unambiguous(ws):
    assert ws.graph.callees("src/app.ts::build") == ["src/globals.ts::presetMini"]
