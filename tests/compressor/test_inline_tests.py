"""Rust's unit tests live inside the file they test (`#[cfg(test)] mod tests`):
that code is test code, left out of a slice unless tests are asked for, like
a test file's."""

from __future__ import annotations

import textwrap

import pytest

from memstrata.compressor import context_query
from memstrata.indexer.graph_snapshot import SnapshotGraph, _state
from memstrata.indexer.workspace import Workspace

SANITIZE = textwrap.dedent("""\
    /// Removes the control characters a terminal would act on from `text`.
    pub fn sanitize_for_terminal(text: &str) -> String {
        text.chars()
            .filter(|c| !c.is_control() || *c == '\\t')
            .collect()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn sanitize_strips_escape() {
            assert_eq!(sanitize_for_terminal("a\\x1b[2Jb"), "a[2Jb");
        }

        #[test]
        fn sanitize_strips_carriage_return() {
            assert_eq!(sanitize_for_terminal("a\\rb"), "ab");
        }

        #[test]
        fn sanitize_keeps_tabs() {
            assert_eq!(sanitize_for_terminal("a\\tb"), "a\\tb");
        }
    }
    """)

ERROR = textwrap.dedent("""\
    use crate::sanitize::sanitize_for_terminal;

    /// Prints an error for the user, with anything a terminal would act on removed.
    pub fn print_error(msg: &str) {
        eprintln!("[error] {}", sanitize_for_terminal(msg));
    }
    """)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("inline") / "crate"
    (root / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text('[package]\nname = "crate"\nversion = "0.1.0"\n')
    (root / "src" / "lib.rs").write_text("pub mod error;\npub mod sanitize;\n")
    (root / "src" / "sanitize.rs").write_text(SANITIZE)
    (root / "src" / "error.rs").write_text(ERROR)
    with Workspace.open(root) as ws:
        ws.index()
        yield ws


def test_an_inline_test_module_is_test_code(ws):
    g = ws.graph
    assert g.is_test_node("src/sanitize.rs::tests.sanitize_strips_escape")
    assert g.is_test_node("src/sanitize.rs::tests")
    assert not g.is_test_node("src/sanitize.rs::sanitize_for_terminal")
    assert not g.is_test_node("src/sanitize.rs")
    # The graph snapshot a server starts from says the same.
    snap = SnapshotGraph(_state(g))
    assert snap.is_test_node("src/sanitize.rs::tests.sanitize_keeps_tabs")
    assert not snap.is_test_node("src/error.rs::print_error")


def test_a_slice_leaves_inline_tests_out_unless_asked(ws):
    r = context_query(ws, "sanitize escape sequences before printing to the terminal", max_tokens=4096)
    assert "src/sanitize.rs::sanitize_for_terminal" in r.full_symbols
    assert "src/error.rs::print_error" in r.full_symbols
    assert "fn sanitize_strips_escape" not in r.context
    assert not any("::tests" in s for s in r.symbols)
    with_tests = context_query(ws, "sanitize escape sequences before printing to the terminal",
                               max_tokens=4096, include_tests=True)
    assert "src/sanitize.rs::tests.sanitize_strips_escape" in with_tests.full_symbols


def test_an_edit_keeps_the_file_s_inline_tests_marked(ws):
    path = ws.root / "src" / "sanitize.rs"
    path.write_text(SANITIZE.replace("mod tests {", "mod tests {\n    // edited"))
    ws.index()
    g = ws.graph
    assert g.is_test_node("src/sanitize.rs::tests.sanitize_keeps_tabs")
    assert not g.is_test_node("src/sanitize.rs::sanitize_for_terminal")
