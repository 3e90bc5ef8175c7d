"""A Cargo workspace: impl blocks in other files attach to their type, trait
impls link to the trait, and `use` paths across the workspace's crates resolve."""

from __future__ import annotations

import shutil

import pytest

from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci

from ..conftest import FIXTURES


@pytest.fixture(scope="module")
def rust_ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("rw") / "rust_workspace"
    shutil.copytree(FIXTURES / "rust_workspace", root)
    with Workspace.open(root) as ws:
        ws.index()
        yield ws


def test_use_paths_across_crates_resolve(rust_ws):
    targets = {(p, m, n): t for p, m, n, _a, _l, t in ci.load_imports(rust_ws.store)}
    # `shape-types` is used as `shape_types`; `circle::Circle` names a child module.
    assert targets[("geometry/src/ops/mod.rs", "shape_types::circle", "Circle")] == "shapes/src/circle.rs"
    assert targets[("geometry/src/lib.rs", "shape_types", "Area")] == "shapes/src/lib.rs"
    assert targets[("app/src/main.rs", "geometry", "total_area")] == "geometry/src/lib.rs"
    assert targets[("shapes/src/lib.rs", "circle", "Circle")] == "shapes/src/circle.rs"


def test_impl_blocks_in_other_files_attach_to_their_type(rust_ws):
    g = rust_ws.graph
    members = {n.node for n in g.neighbors("shapes/src/circle.rs::Circle", ("contains",), "out")}
    assert members == {"geometry/src/ops/mod.rs::Circle.area", "geometry/src/ops/mod.rs::Circle.grow"}
    # A method call through a value of the type resolves to the impl's method.
    assert "geometry/src/ops/mod.rs::Circle.grow" in g.callees("app/src/main.rs::main")


def test_trait_impls_link_to_the_trait_and_its_methods(rust_ws):
    g = rust_ws.graph
    assert g.bases("shapes/src/circle.rs::Circle") == ["shapes/src/lib.rs::Area"]
    assert g.bases("geometry/src/ops/mod.rs::Circle.area") == ["shapes/src/lib.rs::Area.area"]
    assert "shapes/src/circle.rs::Circle" in g.subclasses("shapes/src/lib.rs::Area")


def test_links_follow_an_edit_of_the_type_file(rust_ws, tmp_path):
    root = tmp_path / "rw"
    shutil.copytree(FIXTURES / "rust_workspace", root)
    with Workspace.open(root) as ws:
        ws.index()
        circle = root / "shapes" / "src" / "circle.rs"
        circle.write_text("// moved down\n\n" + circle.read_text())
        ws.index()
        members = {n.node for n in ws.graph.neighbors("shapes/src/circle.rs::Circle", ("contains",), "out")}
        assert "geometry/src/ops/mod.rs::Circle.grow" in members
        assert ws.graph.bases("shapes/src/circle.rs::Circle") == ["shapes/src/lib.rs::Area"]
