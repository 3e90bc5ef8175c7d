"""Rust items written inside a brace macro call (a crate's feature gates, `pin_project!`) are
definitions like any other: found by name, shown whole, reached by calls; an argument that is no
items stays a token tree, and nothing else in the file moves."""

from __future__ import annotations

from memstrata.compressor.outline import build_outline
from memstrata.indexer.parse import parse_source

GATED = b"""macro_rules! cfg_rt { ($($item:item)*) => { $( $item )* } }

cfg_rt! {
    /// Spawns a task.
    pub fn spawn_task(x: u32) -> u32 {
        let y = x + 1;
        y * 2
    }

    cfg_net! {
        pub struct Handle { id: u32 }
    }
}

impl Handle {
    cfg_rt! {
        pub fn current() -> Handle {
            Handle { id: spawn_task(1) }
        }
    }
}

lazy_static! {
    static ref TABLE: Vec<u8> = vec![1, 2];
}

forward_to_deserialize_any! {
    bool u8 u16 string
}

pub fn caller() -> u32 { spawn_task(3) }
"""


def _defs(result) -> set[tuple]:
    return {(s.qualname, s.kind, s.start_line, s.end_line) for s in result.symbols}


def test_items_inside_a_brace_macro_call_are_definitions_at_their_own_lines():
    result = parse_source("src/lib.rs", "rust", GATED)
    assert result.syntax_error is None
    assert _defs(result) == {
        ("cfg_rt", "function", 1, 1),
        ("spawn_task", "function", 5, 8),
        ("Handle", "struct", 11, 11),  # nested one call deeper
        ("Handle.current", "method", 17, 19),  # a call inside an impl's body
        ("TABLE", "constant", 24, 24),  # what `lazy_static!` defines is a static of that name
        ("caller", "function", 31, 31),
    }
    spawn = next(s for s in result.symbols if s.qualname == "spawn_task")
    assert spawn.signature == "pub fn spawn_task(x: u32) -> u32"
    assert spawn.docstring == "Spawns a task."
    calls = {(r.scope, r.name) for r in result.refs if r.kind == "call"}
    assert {("Handle.current", "spawn_task"), ("caller", "spawn_task")} <= calls


def test_an_argument_that_is_no_items_stays_a_token_tree():
    """A list of names, a DSL, or items that do not parse: nothing is made of them, and the
    file reads without an error, as before."""
    source = (b"foo! { a b c }\nbar! { fn broken() -> }\nrules! {\n    GET /x => handler;\n}\n"
              b"pub fn f() {}\nmacro_rules! m {\n    () => { fn inner() {} };\n}\n")
    result = parse_source("a.rs", "rust", source)
    assert result.syntax_error is None
    assert _defs(result) == {("f", "function", 6, 6), ("m", "function", 7, 9)}


def test_a_call_inside_a_function_body_is_left_alone():
    """Only calls standing where items stand are unwrapped: a `select!` or `quote!` in a body is
    an expression."""
    source = b"pub fn run() {\n    tokio::select! {\n        fn_like = x => {}\n    }\n    quote! { fn generated() {} }\n}\n"
    result = parse_source("b.rs", "rust", source)
    assert _defs(result) == {("run", "function", 1, 6)}


def test_macro_wrapped_items_are_cut_whole_by_the_proxy_outline():
    """The proxy's block cuts see the same definitions: a function inside a gate is a unit of
    its own, not part of one long statement."""
    units = build_outline(GATED.decode().split("\n"), "rust", "src/lib.rs").units
    defs = {u.qualname: u.ranges for u in units if u.kind == "def"}
    assert defs["spawn_task"] == [(3, 7)]  # 0-based, its doc comment with it
    assert defs["Handle.current"] == [(16, 18)]


def test_an_unclosed_call_is_left_alone_and_its_error_kept():
    """A file being typed: a call whose closing brace is missing.  The parser supplies a `}` of
    no width there, which is no byte to blank (at the file's end it is past the last byte); the
    file reads as before, with its syntax error."""
    for source in (b"cfg_rt! {\n    pub fn a() {}", b"cfg_rt! {\n    pub fn a() {}\n",
                   b"impl H {\n    pub fn h() {}\n    cfg_rt! {\n        pub fn a() {}"):
        result = parse_source("c.rs", "rust", source)
        assert result.syntax_error is not None
        assert "a" not in {s.name for s in result.symbols}


class _CountingBytes(bytes):
    """Source text that counts the bytes its backward searches read."""

    read = 0

    def rfind(self, sub, start=0, end=None):
        end = len(self) if end is None else end
        _CountingBytes.read += max(0, end - start)
        return super().rfind(sub, start, end)


def test_a_long_line_of_many_bang_braces_is_read_once():
    """A generated table or literal on one long line holding thousands of `!{`: the search for
    each one's line start reads back only to the previous one, not to the line's start (which
    made a 3 MB line take half a minute)."""
    from memstrata.indexer import rust_macros
    from memstrata.indexer.parse import _parse  # the tree before any unwrapping

    text = b'cfg_rt! {\n    pub fn a() {}\n}\npub const S: &str = "' + b"!{" * 5000 + b'";\n'
    source = _CountingBytes(text)
    _CountingBytes.read = 0
    calls = rust_macros._item_calls(source, _parse("rust", text).root_node)
    assert [start for start, _, _ in calls] == [0]
    assert _CountingBytes.read <= len(text)


def test_a_file_over_the_size_limit_is_read_as_it_parses(monkeypatch):
    """Unwrapping costs two more parses; a file past the limit (generated, rarely asked about)
    keeps its calls as token trees."""
    from memstrata.indexer import rust_macros
    source = b"gate! {\n    pub fn gated() {}\n}\npub fn plain() {}\n"
    monkeypatch.setattr(rust_macros, "MAX_UNWRAP_BYTES", len(source) - 1)
    assert _defs(parse_source("big.rs", "rust", source)) == {("plain", "function", 4, 4)}
    monkeypatch.setattr(rust_macros, "MAX_UNWRAP_BYTES", len(source))
    assert ("gated", "function", 2, 2) in _defs(parse_source("big.rs", "rust", source))


def test_a_file_with_an_error_elsewhere_is_unwrapped_when_it_reads_no_worse():
    """An error outside the calls stays where it was, and the gated items are found."""
    source = b"gate! {\n    pub fn gated() {}\n}\npub fn broken( {\n}\npub fn after() {}\n"
    result = parse_source("err.rs", "rust", source)
    assert result.syntax_error is not None
    assert ("gated", "function", 2, 2) in _defs(result)
