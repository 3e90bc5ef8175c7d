"""Rust names resolved as rustc resolves them, not by a name unique in the project: modules
declared with `#[path]`, calls spelled through a module path (`sys::f()`, `crate::a::f()`,
`super::x::f()`), a crate re-exported under another name, and locals whose type an associated
constructor gives."""

from __future__ import annotations

from memstrata.storage import code_index as ci

from ..conftest import indexed_workspace

# Every module defines `open_handle`: only the spelled path tells them apart.
OPEN = "pub fn open_handle() -> u32 {\n    1\n}\n"


def test_a_path_attribute_names_the_module_file(tmp_path):
    w = indexed_workspace(tmp_path / "p", {
        "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
        "src/lib.rs": ('#[path = "platform/unix_impl.rs"]\n#[cfg(unix)]\nmod sys;\nmod util;\nmod net;\n\n'
                       "pub fn entry() -> u32 {\n    sys::open_handle() + util::open_handle()\n}\n"),
        "src/platform/unix_impl.rs": OPEN,
        "src/sys.rs": OPEN,  # what a `mod sys;` without the attribute would have been
        "src/util.rs": OPEN,
        # Relative to the declaring file's directory, in a mod.rs as in any other file.
        "src/net/mod.rs": '#[path = "../shared/tcp_impl.rs"]\nmod tcp;\n\npub fn dial() -> u32 {\n    tcp::open_handle()\n}\n',
        "src/shared/tcp_impl.rs": OPEN,
    })
    with w:
        targets = {(p, m, a): t for p, m, _n, a, _l, t in ci.load_imports(w.store)}
        assert targets[("src/lib.rs", "./platform/unix_impl.rs", "sys")] == "src/platform/unix_impl.rs"
        assert targets[("src/net/mod.rs", "../shared/tcp_impl.rs", "tcp")] == "src/shared/tcp_impl.rs"
        entry = w.graph.callees("src/lib.rs::entry")
        assert "src/platform/unix_impl.rs::open_handle" in entry and "src/sys.rs::open_handle" not in entry
        assert w.graph.callees("src/net/mod.rs::dial") == ["src/shared/tcp_impl.rs::open_handle"]
