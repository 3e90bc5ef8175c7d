"""A call through a receiver known to be outside the project -- a local bound to a library's
object, an imported library module, a `std::` or external crate path -- is not a call of the
project definition that merely shares the method's name (often the caller itself: a `wrap`
that calls `wrapper.wrap()` is no recursion).  A free function is never the target of a method
call on an object.  Calls whose receiver the index cannot place keep resolving by name."""

from __future__ import annotations

import pytest

from ..conftest import indexed_workspace


def _target(ws, path: str, scope: str, name: str) -> str | None:
    """The stored target of the one call of ``name`` from ``scope`` of ``path``."""
    ws.graph  # resolves, and saves the targets
    rows = ws.store.execute(
        "SELECT r.target FROM refs r JOIN files f ON f.id = r.file_id "
        "WHERE f.path = ? AND r.scope = ? AND r.name = ? AND r.kind = 'call'", (path, scope, name))
    assert len(rows) == 1, rows
    return rows[0][0]


PYTHON = {
    "text.py": ("import textwrap\nimport json\n\n\n"
                "def wrap(text, width):\n    wrapper = textwrap.TextWrapper(width=width)\n    return wrapper.wrap(text)\n\n\n"
                "def loads(s):\n    return json.loads(s)\n\n\n"
                "def fill(text):\n    return textwrap.TextWrapper().fill(text)\n\n\n"
                "def join(parts):\n    return ', '.join(parts)\n"),
    "other.py": ("import textwrap\n\nfrom store import Store\nfrom . import helpers\n\n\n"
                 "def short(text):\n    w = textwrap.TextWrapper()\n    return w.shorten(text)\n\n\n"
                 "def keep(obj, s: Store):\n    obj.save()\n    s.save()\n    helpers.shorten('x')\n"),
    "store.py": "class Store:\n    def save(self):\n        return 1\n",
    "helpers.py": "def shorten(text):\n    return text[:10]\n",
}


@pytest.fixture(scope="module")
def python(tmp_path_factory):
    with indexed_workspace(tmp_path_factory.mktemp("py"), PYTHON) as ws:
        yield ws


def test_a_method_of_a_library_object_is_not_the_enclosing_function(python):
    assert _target(python, "text.py", "wrap", "wrap") is None  # the repro: no recursion
    assert python.graph.callers("text.py::wrap") == []


def test_a_method_of_a_library_object_is_no_free_function_of_another_file(python):
    # `w.shorten()` on a TextWrapper is not helpers.py's `shorten`.
    assert _target(python, "other.py", "short", "shorten") is None
    assert python.graph.callers("helpers.py::shorten") == ["other.py::keep"]


def test_a_method_of_a_call_result_or_a_literal_is_no_free_function(python):
    assert _target(python, "text.py", "fill", "fill") is None
    assert _target(python, "text.py", "join", "join") is None


def test_a_library_modules_function_is_not_the_projects_namesake(python):
    assert _target(python, "text.py", "loads", "loads") is None


def test_calls_the_index_can_place_or_only_name_still_resolve(python):
    # An unknown receiver's method stays resolved by its unique name; an imported project
    # module's function through the module.
    assert python.graph.callees("other.py::keep") == ["helpers.py::shorten", "store.py::Store.save"]


RUST = {
    "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
    "src/lib.rs": ("mod util;\nuse std::path::Path;\n\n"
                   "pub fn symlink_metadata(p: &Path) -> std::io::Result<std::fs::Metadata> {\n"
                   "    std::fs::symlink_metadata(p)\n}\n\n"
                   "pub fn from_str(s: &str) -> u32 {\n    serde_json::from_str(s).unwrap()\n}\n\n"
                   "pub fn len(v: Vec<u8>) -> usize {\n    let b = v.clone();\n    b.len()\n}\n\n"
                   "pub fn open() -> u32 {\n    util::open() + core::cmp::max(1, 2)\n}\n\n"
                   "pub fn max(a: u32) -> u32 {\n    a\n}\n"),
    "src/util.rs": "pub fn open() -> u32 {\n    1\n}\n",
}


@pytest.fixture(scope="module")
def rust(tmp_path_factory):
    with indexed_workspace(tmp_path_factory.mktemp("rs"), RUST) as ws:
        yield ws


def test_a_std_path_call_is_not_the_projects_function_of_that_name(rust):
    assert _target(rust, "src/lib.rs", "symlink_metadata", "symlink_metadata") is None
    assert _target(rust, "src/lib.rs", "open", "max") is None  # `core::cmp::max`


def test_an_external_crates_path_call_is_not_the_projects_function(rust):
    assert _target(rust, "src/lib.rs", "from_str", "from_str") is None


def test_a_rust_method_call_is_no_free_function(rust):
    assert _target(rust, "src/lib.rs", "len", "len") is None


def test_a_path_into_the_projects_own_module_still_resolves(rust):
    assert rust.graph.callees("src/lib.rs::open") == ["src/util.rs::open"]


def test_a_method_call_on_an_object_of_a_constructor_is_no_free_function_js(tmp_path):
    with indexed_workspace(tmp_path / "js", {
        "fmt.js": ("function getTime() {\n  const d = new Date();\n  return d.getTime();\n}\n"
                   "const utils = { pad };\nfunction pad(s) {\n  return s;\n}\n"
                   "function show(s) {\n  return utils.pad(s);\n}\n"
                   "module.exports = { getTime, show };\n"),
    }) as ws:
        assert _target(ws, "fmt.js", "getTime", "getTime") is None
        # An object holding the module's functions is called through as before.
        assert ws.graph.callees("fmt.js::show") == ["fmt.js::pad"]


def test_a_method_call_on_a_go_value_is_no_free_function(tmp_path):
    with indexed_workspace(tmp_path / "go", {
        "go.mod": "module example.com/p\n\ngo 1.21\n",
        "w/w.go": ("package w\n\nimport \"bytes\"\n\n"
                   "func Write(b []byte) int {\n\tvar buf bytes.Buffer\n\tn, _ := buf.Write(b)\n\treturn n\n}\n"),
        "w/v.go": "package w\n\nfunc Len(b []byte) int {\n\treturn len(b)\n}\n",
        "w/u.go": "package w\n\nimport \"bytes\"\n\nfunc Size(b []byte) int {\n\treturn bytes.NewBuffer(b).Len()\n}\n",
        # A package named unlike its directory is still called through its name.
        "v3/y.go": "package yaml\n\nfunc Marshal() int {\n\treturn 1\n}\n",
        "main.go": "package main\n\nimport \"example.com/p/v3\"\n\nfunc main() {\n\tyaml.Marshal()\n}\n",
    }) as ws:
        assert _target(ws, "w/w.go", "Write", "Write") is None
        assert _target(ws, "w/u.go", "Size", "Len") is None
        assert ws.graph.callees("main.go::main") == ["v3/y.go::Marshal"]
