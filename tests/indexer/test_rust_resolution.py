"""Rust names resolved as rustc resolves them, not by a name unique in the project: modules
declared with `#[path]`, calls spelled through a module path (`sys::f()`, `crate::a::f()`,
`super::x::f()`), a crate re-exported under another name, and locals whose type an associated
constructor gives."""

from __future__ import annotations

from memstrata.storage import code_index as ci

from ..conftest import indexed_workspace, write_files
from .test_graph import _edit, assert_same_as_fresh, indexed_graph

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
        assert w.graph.callees("src/lib.rs::entry") == ["src/platform/unix_impl.rs::open_handle",
                                                        "src/util.rs::open_handle"]
        assert w.graph.callees("src/net/mod.rs::dial") == ["src/shared/tcp_impl.rs::open_handle"]


def test_calls_through_a_module_path_reach_that_modules_function(tmp_path):
    w = indexed_workspace(tmp_path / "p", {
        "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
        "src/lib.rs": ("mod sys;\nmod util;\nmod net;\n\n"
                       "pub fn via_child() -> u32 {\n    sys::open_handle()\n}\n"
                       "pub fn via_crate() -> u32 {\n    crate::util::open_handle()\n}\n"
                       "pub fn via_self() -> u32 {\n    self::sys::open_handle()\n}\n"
                       "pub fn via_nested() -> u32 {\n    net::tcp::open_handle()\n}\n"),
        "src/sys.rs": OPEN,
        "src/util.rs": OPEN + "pub fn via_super() -> u32 {\n    super::sys::open_handle()\n}\n",
        "src/net/mod.rs": "pub mod tcp;\n\npub fn dial() -> u32 {\n    tcp::open_handle() + crate::util::open_handle()\n}\n",
        "src/net/tcp.rs": OPEN + "pub fn reopen() -> u32 {\n    super::super::sys::open_handle()\n}\n",
    })
    with w:
        g = w.graph
        assert g.callees("src/lib.rs::via_child") == ["src/sys.rs::open_handle"]
        assert g.callees("src/lib.rs::via_crate") == ["src/util.rs::open_handle"]
        assert g.callees("src/lib.rs::via_self") == ["src/sys.rs::open_handle"]
        assert g.callees("src/lib.rs::via_nested") == ["src/net/tcp.rs::open_handle"]
        assert g.callees("src/util.rs::via_super") == ["src/sys.rs::open_handle"]
        assert g.callees("src/net/mod.rs::dial") == ["src/net/tcp.rs::open_handle", "src/util.rs::open_handle"]
        assert g.callees("src/net/tcp.rs::reopen") == ["src/sys.rs::open_handle"]


def test_a_crate_re_exported_under_another_name_is_followed(tmp_path):
    w = indexed_workspace(tmp_path / "ws", {
        "Cargo.toml": '[workspace]\nmembers = ["inner-crate", "facade", "other", "app"]\n',
        "inner-crate/Cargo.toml": '[package]\nname = "inner-crate"\nversion = "0.1.0"\n',
        "inner-crate/src/lib.rs": "mod imp;\npub use crate::imp::run;\n",
        "inner-crate/src/imp.rs": "pub fn run() -> u32 {\n    1\n}\n",
        "other/Cargo.toml": '[package]\nname = "other"\nversion = "0.1.0"\n',
        "other/src/lib.rs": "pub fn run() -> u32 {\n    2\n}\n",
        "facade/Cargo.toml": '[package]\nname = "facade"\nversion = "0.1.0"\n',
        "facade/src/lib.rs": "pub use inner_crate as inner;\n",
        "app/Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\n',
        "app/src/main.rs": "fn main() {\n    facade::inner::run();\n}\n",
    })
    with w:
        assert w.graph.callees("app/src/main.rs::main") == ["inner-crate/src/imp.rs::run"]


def test_module_paths_follow_an_edit_of_the_declaring_file(tmp_path):
    # Which file `super::sys` is changes with the parent's `mod sys;`: the other files' calls
    # through it are resolved again, as a fresh build resolves them.
    root = write_files(tmp_path / "p", {
        "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
        "src/lib.rs": "mod sys;\nmod util;\n",
        "src/sys.rs": OPEN,
        "src/platform/unix_impl.rs": OPEN,
        "src/util.rs": "pub fn via_super() -> u32 {\n    super::sys::open_handle()\n}\n",
    })
    with indexed_graph(root) as (w, g):
        assert g.callees("src/util.rs::via_super") == ["src/sys.rs::open_handle"]
        _edit(w, g, root, {"src/lib.rs": '#[path = "platform/unix_impl.rs"]\nmod sys;\nmod util;\n'})
        assert g.callees("src/util.rs::via_super") == ["src/platform/unix_impl.rs::open_handle"]
        assert_same_as_fresh(w, g)


def test_a_local_built_by_its_types_constructor_is_of_that_type(tmp_path):
    w = indexed_workspace(tmp_path / "p", {
        "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
        "src/queue.rs": ("pub struct Queue {\n    items: Vec<u32>,\n}\n\nimpl Queue {\n"
                         "    pub fn new() -> Self {\n        Queue { items: Vec::new() }\n    }\n"
                         "    pub fn with_capacity(n: usize) -> Queue {\n        Queue { items: Vec::with_capacity(n) }\n    }\n"
                         "    pub fn build() -> Result<Self, ()> {\n        Ok(Queue::new())\n    }\n"
                         "    pub fn first(&self) -> u32 {\n        0\n    }\n"
                         "    pub fn len(&self) -> usize {\n        self.items.len()\n    }\n}\n"),
        "src/other.rs": "pub struct Other;\n\nimpl Other {\n    pub fn len(&self) -> usize {\n        0\n    }\n}\n",
        "src/lib.rs": ("mod queue;\nmod other;\nuse crate::queue::Queue;\n\n"
                       "pub fn by_new() -> usize {\n    let q = Queue::new();\n    q.len()\n}\n"
                       "pub fn by_capacity() -> usize {\n    let q = Queue::with_capacity(4);\n    q.len()\n}\n"
                       "pub fn by_literal() -> usize {\n    let q = Queue { items: vec![] };\n    q.len()\n}\n"
                       # Not `Self` or `Queue`: what `build` returns is not said to be a Queue.
                       "pub fn by_result() -> usize {\n    let q = Queue::build();\n    q.len()\n}\n"),
    })
    with w:
        g = w.graph
        for caller in ("by_new", "by_capacity", "by_literal"):
            assert "src/queue.rs::Queue.len" in g.callees(f"src/lib.rs::{caller}"), caller
        assert g.callees("src/lib.rs::by_result") == ["src/queue.rs::Queue.build"]


def test_a_local_built_by_a_fallible_constructor_and_unwrapped_is_of_that_type(tmp_path):
    # `T::open()?`, `.unwrap()`, `.expect(..)` (after an `.await` too) give what the Result or
    # Option the function returns holds: the type when that is `Self` or the type, else nothing.
    w = indexed_workspace(tmp_path / "p", {
        "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
        "src/queue.rs": ("pub struct Queue;\n\nimpl Queue {\n"
                         "    pub fn open() -> Result<Self, std::io::Error> {\n        Ok(Queue)\n    }\n"
                         "    pub fn find(name: &str) -> Option<Queue> {\n        Some(Queue)\n    }\n"
                         "    pub async fn connect() -> std::io::Result<Self> {\n        Ok(Queue)\n    }\n"
                         "    pub fn count() -> Result<Other, ()> {\n        Ok(Other)\n    }\n"
                         "    pub fn len(&self) -> usize {\n        0\n    }\n}\n\n"
                         "pub struct Other;\n\nimpl Other {\n    pub fn len(&self) -> usize {\n        1\n    }\n}\n"),
        "src/lib.rs": ("mod queue;\nuse crate::queue::Queue;\n\n"
                       "pub fn by_try() -> std::io::Result<usize> {\n    let q = Queue::open()?;\n    Ok(q.len())\n}\n"
                       "pub fn by_unwrap() -> usize {\n    let q = Queue::find(\"a\").unwrap();\n    q.len()\n}\n"
                       "pub fn by_expect() -> usize {\n    let q = Queue::open().expect(\"open\");\n    q.len()\n}\n"
                       "pub async fn by_await() -> std::io::Result<usize> {\n    let q = Queue::connect().await?;\n"
                       "    Ok(q.len())\n}\n"
                       # What `count` returns holds an Other, not a Queue.
                       "pub fn by_other() -> usize {\n    let n = Queue::count().unwrap();\n    n.len()\n}\n"),
    })
    with w:
        g = w.graph
        for caller in ("by_try", "by_unwrap", "by_expect", "by_await"):
            assert "src/queue.rs::Queue.len" in g.callees(f"src/lib.rs::{caller}"), caller
        assert "src/queue.rs::Queue.len" not in g.callees("src/lib.rs::by_other")


# Two types with a method of one name: only the field's declared type tells which one a call on
# the field means.
SINKS = ("pub struct Wire;\n\nimpl Wire {\n    pub fn flush(&self) -> u32 {\n        1\n    }\n}\n\n"
         "pub struct Disk;\n\nimpl Disk {\n    pub fn flush(&self) -> u32 {\n        2\n    }\n}\n")


def test_a_call_on_a_field_reaches_the_method_of_the_fields_type(tmp_path):
    w = indexed_workspace(tmp_path / "p", {
        "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
        "src/lib.rs": "mod sinks;\nmod conn;\nmod session;\n",
        "src/sinks.rs": SINKS,
        "src/conn.rs": ("use std::sync::Arc;\nuse crate::sinks::{Disk, Wire};\n\n"
                        "pub struct Conn {\n    io: Wire,\n    log: Arc<Disk>,\n    pub(crate) spare: Box<Wire>,\n}\n\n"
                        "impl Conn {\n    pub fn close(&mut self) -> u32 {\n        self.io.flush()\n    }\n"
                        "    pub fn sync(&self) -> u32 {\n        self.log.flush()\n    }\n}\n"),
        # An impl in another file than its struct; a field of a field.
        "src/session.rs": ("use crate::conn::Conn;\n\npub struct Session {\n    conn: Conn,\n}\n\n"
                           "impl Conn {\n    pub fn drain(&self) -> u32 {\n        self.spare.flush()\n    }\n}\n\n"
                           "impl Session {\n    pub fn end(&self) -> u32 {\n        self.conn.io.flush()\n    }\n"
                           "    pub fn unknown(&self, x: u32) -> u32 {\n        self.other.flush()\n    }\n}\n"),
    })
    with w:
        g = w.graph
        assert g.callees("src/conn.rs::Conn.close") == ["src/sinks.rs::Wire.flush"]
        assert g.callees("src/conn.rs::Conn.sync") == ["src/sinks.rs::Disk.flush"]
        assert g.callees("src/session.rs::Conn.drain") == ["src/sinks.rs::Wire.flush"]
        assert g.callees("src/session.rs::Session.end") == ["src/sinks.rs::Wire.flush"]
        assert g.callees("src/session.rs::Session.unknown") == []  # no such field: no guess


def test_field_types_follow_an_edit_of_the_struct(tmp_path):
    # A call through a field of a field depends on the middle struct's declaration in another
    # file: an edit there moves it, as a fresh build resolves it.
    root = write_files(tmp_path / "p", {
        "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
        "src/lib.rs": "mod sinks;\nmod conn;\nmod session;\n",
        "src/sinks.rs": SINKS,
        "src/conn.rs": "use crate::sinks::{Disk, Wire};\n\npub struct Conn {\n    io: Wire,\n}\n",
        "src/session.rs": ("use crate::conn::Conn;\n\npub struct Session {\n    conn: Conn,\n}\n\n"
                           "impl Session {\n    pub fn end(&self) -> u32 {\n        self.conn.io.flush()\n    }\n}\n"),
    })
    with indexed_graph(root) as (w, g):
        assert g.callees("src/session.rs::Session.end") == ["src/sinks.rs::Wire.flush"]
        _edit(w, g, root, {"src/conn.rs": "use crate::sinks::{Disk, Wire};\n\npub struct Conn {\n    io: Disk,\n}\n"})
        assert g.callees("src/session.rs::Session.end") == ["src/sinks.rs::Disk.flush"]
        assert_same_as_fresh(w, g)


def test_self_in_an_impl_for_a_type_the_project_does_not_define(tmp_path):
    # `impl Grow for Vec<u8>`: `self` is a Vec, so `self.reserve(..)` is Vec's own method, not the
    # one project type's `reserve`; a method of an impl for the same type, or the trait's default
    # method, is still reached.
    w = indexed_workspace(tmp_path / "p", {
        "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
        "src/buffer.rs": ("pub struct Buffer;\n\nimpl Buffer {\n"
                          "    pub fn reserve(&mut self, n: usize) {}\n"
                          "    pub fn fill(&mut self) {\n        self.reserve(8);\n    }\n}\n"),
        "src/grow.rs": ("pub trait Grow {\n    fn room(&self) -> usize;\n"
                        "    fn ensure(&mut self) {}\n}\n\n"
                        "impl Grow for Vec<u8> {\n    fn room(&self) -> usize {\n        0\n    }\n}\n\n"
                        "pub trait Fill {\n    fn top_up(&mut self);\n}\n\n"
                        "impl Fill for Vec<u8> {\n    fn top_up(&mut self) {\n"
                        "        self.reserve(64);\n        self.ensure();\n        let _ = self.room();\n    }\n}\n"),
        "src/lib.rs": "mod buffer;\nmod grow;\n",
    })
    with w:
        g = w.graph
        assert g.callees("src/buffer.rs::Buffer.fill") == ["src/buffer.rs::Buffer.reserve"]
        assert sorted(g.callees("src/grow.rs::Vec.top_up")) == ["src/grow.rs::Grow.ensure", "src/grow.rs::Vec.room"]
