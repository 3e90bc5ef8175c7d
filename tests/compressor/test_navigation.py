"""find_symbol, find_references and file_outline on real indexes of the fixture
projects (every language), including bad input and files edited after indexing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memstrata.compressor.navigation import NavigationError, file_outline, find_references, find_symbol
from memstrata.indexer.workspace import Workspace

from ..conftest import indexed_workspace

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
LANGUAGE_FIXTURES = ["c_project", "commonjs_project", "cpp_project", "csharp_project", "go_project", "java_project",
                     "javascript_project", "php_project", "python_project", "ruby_project", "rust_project",
                     "typescript_project"]

# Hand-written from reading the fixtures: every use of one definition per
# language, as (path, line, kind, enclosing definition or None).
REFERENCES = {
    "c_project": ("src/hash.c::hash_password", [
        ("src/auth.c", 14, "call", "src/auth.c::auth_login"),
        ("src/main.c", 4, "call", "src/main.c::lookup"),
    ]),
    "commonjs_project": ("lib/response.js::res.send", [
        ("lib/handlers.js", 3, "call", "lib/handlers.js::onRequest"),
        ("lib/response.js", 21, "call", "lib/response.js::res.json"),
        ("lib/response.js", 29, "call", "lib/response.js::res.sendFile"),
    ]),
    "cpp_project": ("include/auth/session.hpp::Session", [
        ("include/auth/service.hpp", 12, "type", "include/auth/service.hpp::Authenticator"),
        ("include/auth/service.hpp", 18, "type", "include/auth/service.hpp::AuthService"),
        ("src/main.cpp", 6, "type", "src/main.cpp::main"),
        ("src/service.cpp", 13, "type", "src/service.cpp::AuthService.login"),
        ("src/service.cpp", 14, "type", "src/service.cpp::AuthService.login"),
    ]),
    "csharp_project": ("src/Util/Hasher.cs::Hasher.Hash", [
        ("src/Auth/AuthService.cs", 22, "call", "src/Auth/AuthService.cs::AuthService.Login"),
        ("src/Web/LoginController.cs", 19, "call", "src/Web/LoginController.cs::LoginController.Handle"),
    ]),
    "go_project": ("hash/hash.go::Hash", [
        ("auth/service.go", 33, "call", "auth/service.go::Service.Login"),
    ]),
    "java_project": ("src/main/java/com/acme/util/Hash.java::Hash.sha", [
        ("src/main/java/com/acme/auth/AuthService.java", 3, "import", None),
        ("src/main/java/com/acme/auth/AuthService.java", 14, "call",
         "src/main/java/com/acme/auth/AuthService.java::AuthService.login"),
        ("src/main/java/com/acme/web/LoginController.java", 11, "call",
         "src/main/java/com/acme/web/LoginController.java::LoginController.handle"),
    ]),
    "javascript_project": ("src/hash.js::hashPassword", [
        ("src/hash.js", 10, "call", "src/hash.js::verifyPassword"),
    ]),
    "php_project": ("src/Util/Hash.php::Hash.make", [
        ("src/Auth/AuthService.php", 18, "call", "src/Auth/AuthService.php::AuthService.login"),
    ]),
    "python_project": ("app/util/crypto.py::hash_password", [
        ("app/auth/service.py", 3, "import", None),
        ("app/auth/service.py", 25, "call", "app/auth/service.py::AuthService.login"),
        ("tests/test_auth.py", 2, "import", None),
        ("tests/test_auth.py", 6, "call", "tests/test_auth.py::test_login_accepts_right_password"),
    ]),
    "ruby_project": ("lib/auth/hashing.rb::Auth.Hashing.digest", [
        ("lib/auth/service.rb", 15, "call", "lib/auth/service.rb::Auth.Service.login"),
    ]),
    "rust_project": ("src/hash.rs::hash_password", [
        ("src/auth/service.rs", 5, "import", None),
        ("src/auth/service.rs", 20, "call", "src/auth/service.rs::AuthService.login"),
    ]),
    "typescript_project": ("src/models.ts::User", [
        ("src/auth.ts", 2, "import", None),
        ("src/auth.ts", 13, "type", "src/auth.ts::Session.constructor"),
        ("src/auth.ts", 16, "type", "src/auth.ts::AuthService"),
        ("src/auth.ts", 17, "type", "src/auth.ts::AuthService"),
        ("src/auth.ts", 19, "type", "src/auth.ts::AuthService.load"),
    ]),
}


def _indexed(tmp_path_factory, name: str) -> Path:
    dest = tmp_path_factory.mktemp("nav") / name
    shutil.copytree(FIXTURES / name, dest, ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    with Workspace.open(dest) as ws:
        ws.index()
    return dest


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = _indexed(tmp_path_factory, name)
        return cache[name]

    return get


@pytest.fixture
def python_ws(tmp_path):
    dest = tmp_path / "python_project"
    shutil.copytree(FIXTURES / "python_project", dest, ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    ws = Workspace.open(dest)
    ws.index()
    yield ws
    ws.close()


def _file_lines(root: Path, path: str, start: int, end: int) -> bytes:
    data = (root / path).read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    text = b"".join(data.splitlines(keepends=True)[start - 1 : end])
    for eol in (b"\r\n", b"\n", b"\r"):
        if text.endswith(eol):
            return text[: -len(eol)]
    return text


@pytest.mark.parametrize("fixture", LANGUAGE_FIXTURES)
def test_every_body_is_the_files_own_lines(indexed, fixture):
    root = indexed(fixture)
    with Workspace.open(root) as ws:
        nodes = [n for n in ws.graph.nodes() if "::" in n]
        assert len(nodes) >= 5
        for node in nodes:
            out = find_symbol(ws, node, include_body=True)
            assert not out["truncated"]
            [sym] = out["symbols"]
            assert sym["symbol"] == node and sym["path"] == node.split("::")[0]
            assert 1 <= sym["start_line"] <= sym["end_line"]
            assert sym["body"].encode("utf-8") == _file_lines(root, sym["path"], sym["start_line"], sym["end_line"])
            assert sym["body"].strip()


@pytest.mark.parametrize("fixture", sorted(REFERENCES))
def test_references_match_the_hand_written_list(indexed, fixture):
    symbol, expected = REFERENCES[fixture]
    root = indexed(fixture)
    with Workspace.open(root) as ws:
        out = find_references(ws, symbol)
    assert out["symbol"] == symbol and not out["truncated"]
    got = [(r["path"], r["line"], r["kind"], r["symbol"]) for r in out["references"]]
    assert got == expected
    for r in out["references"]:
        line = (root / r["path"]).read_text(encoding="utf-8").splitlines()[r["line"] - 1]
        assert r["snippet"] == line.strip()


@pytest.mark.parametrize("fixture", LANGUAGE_FIXTURES)
def test_outline_is_in_source_order_and_nested(indexed, fixture):
    root = indexed(fixture)
    with Workspace.open(root) as ws:
        files = [f for f in ws.graph.files() if ws.graph.symbols_in_file(f)]
        for path in files:
            out = file_outline(ws, path, depth=5)
            assert out["path"] == path and out["language"]

            def check(entries, lo, hi, prefix):
                starts = [e["start_line"] for e in entries]
                assert starts == sorted(starts)
                for e in entries:
                    assert lo <= e["start_line"] <= e["end_line"] <= hi
                    assert e["symbol"].startswith(prefix)
                    check(e["children"], e["start_line"], e["end_line"], e["symbol"] + ".")

            check(out["symbols"], 1, 10**9, path + "::")
            flat = []

            def walk(entries):
                for e in entries:
                    flat.append(e["symbol"])
                    walk(e["children"])

            walk(out["symbols"])
            assert sorted(flat) == sorted(set(ws.graph.symbols_in_file(path)))


def test_outline_of_a_python_file(python_ws):
    out = file_outline(python_ws, "app/auth/service.py")
    shape = [(e["symbol"].split("::")[1], e["kind"], [c["symbol"].split("::")[1] for c in e["children"]])
             for e in out["symbols"]]
    assert shape == [("MAX_ATTEMPTS", "constant", []), ("InvalidCredentials", "class", []),
                     ("AuthService", "class", ["AuthService.__init__", "AuthService.login", "AuthService.logout"])]
    assert out["deeper"] == 0
    top = file_outline(python_ws, "app/auth/service.py", depth=1)
    assert [e["children"] for e in top["symbols"]] == [[], [], []]
    assert top["deeper"] == 3  # the three methods, counted so the reader knows to look


def test_name_forms(python_ws):
    ws = python_ws
    login = "app/auth/service.py::AuthService.login"
    for name in ("AuthService.login", login, "service.py::AuthService.login", "app.auth.service.AuthService.login",
                 "login", "AuthService#login",
                 # as prose writes a function, and a path copied from an editor or a stack trace
                 "AuthService.login()", "login()", f"{ws.root}/app/auth/service.py::AuthService.login",
                 f"{ws.root.name}/app/auth/service.py::AuthService.login()"):
        assert [s["symbol"] for s in find_symbol(ws, name)["symbols"]] == [login], name
        assert find_references(ws, name)["symbol"] == login, name
    found = find_symbol(ws, "Auth*")["symbols"]
    assert found[0]["symbol"] == "app/auth/service.py::AuthService"
    assert all("auth" in s["symbol"].split("::")[1].lower() for s in found)
    assert "body" not in found[0]
    classes = find_symbol(ws, "A*", kind="class")["symbols"]
    assert classes and all(s["kind"] == "class" for s in classes)
    in_dir = find_symbol(ws, "__init__", path="app/auth")["symbols"]
    assert in_dir and all(s["path"].startswith("app/auth/") for s in in_dir)


def test_exact_matches_come_first(python_ws):
    out = find_symbol(python_ws, "login*")["symbols"]
    names = [s["symbol"].split("::")[1].rsplit(".", 1)[-1] for s in out]
    assert names[0] == "login" and "login_route" in names


def test_bad_input_is_one_sentence(python_ws):
    ws = python_ws
    cases = [
        (lambda: find_symbol(ws, "logn"), "no symbol matches 'logn'; did you mean login"),
        (lambda: find_symbol(ws, "   "), "name is empty"),
        (lambda: find_symbol(ws, 5), "name must be a string"),
        (lambda: find_symbol(ws, "a*b"), "'*' only at its end"),
        (lambda: find_symbol(ws, "login", kind="widget"), "kind must be one of function, method"),
        (lambda: find_symbol(ws, "login", include_body="yes"), "include_body must be true or false"),
        (lambda: find_symbol(ws, "login", max_results="many"), "max_results must be an integer"),
        (lambda: find_symbol(ws, "login", path="/etc"), "path is outside the project"),
        (lambda: find_symbol(ws, "login", path="../elsewhere"), "path is outside the project"),
        (lambda: find_symbol(ws, "login", path="nowhere/else.py"), "nowhere/else.py is not an indexed file or folder"),
        (lambda: find_symbol(ws, "login", kind="class"), "'login' names no symbol of kind class"),
        (lambda: find_references(ws, "__init__"), "symbol '__init__' is ambiguous: it names"),
        (lambda: find_references(ws, ""), "symbol is empty"),
        (lambda: find_references(ws, "AuthServise.login"), "no symbol matches 'AuthServise.login'"),
        (lambda: file_outline(ws, "/etc/passwd"), "path is outside the project"),
        (lambda: file_outline(ws, "app/missing.py"), "app/missing.py is not an indexed file"),
        # A folder where a file is asked for is said to be one, with a file of it to outline instead.
        (lambda: file_outline(ws, "app/auth"), "app/auth is a folder; outline one of its indexed files (such as "
                                                "app/auth/"),
        (lambda: file_outline(ws, "app/auth/service.py", depth=0), "depth must be at least 1"),
    ]
    for call, start in cases:
        with pytest.raises(NavigationError) as info:
            call()
        message = str(info.value)
        assert start in message, message
        assert "\n" not in message and "Traceback" not in message
        assert "/etc" not in message and str(ws.root.parent) not in message
    with pytest.raises(NavigationError) as info:
        find_references(ws, "__init__")
    assert "app/auth/service.py::AuthService.__init__" in str(info.value)


def test_max_results_is_clamped(python_ws):
    ws = python_ws
    everything = find_symbol(ws, "_*", max_results=1000)
    assert len(everything["symbols"]) <= 200
    one = find_symbol(ws, "_*", max_results=0)
    assert len(one["symbols"]) == 1 and one["truncated"]
    refs = find_references(ws, "app/util/crypto.py::hash_password", max_results=-5)
    assert len(refs["references"]) == 1 and refs["truncated"]


def test_repeated_uses_in_one_scope_each_get_their_line(tmp_path):
    root = tmp_path / "p"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "lib.py").write_text("def helper(x):\n    return x\n")
    (root / "pkg" / "use.py").write_text(
        "from pkg.lib import helper\n\n\ndef run(items):\n    a = helper(1)\n\n"
        "    def inner():\n        return helper(2)\n    b = helper(3) + helper(4)\n    return a, b, inner\n")
    with Workspace.open(root) as ws:
        ws.index()
        out = find_references(ws, "helper")
    got = [(r["path"], r["line"], r["kind"], r["symbol"]) for r in out["references"]]
    assert got == [("pkg/use.py", 1, "import", None),
                   ("pkg/use.py", 5, "call", "pkg/use.py::run"),
                   ("pkg/use.py", 8, "call", "pkg/use.py::run.inner"),
                   ("pkg/use.py", 9, "call", "pkg/use.py::run")]


def test_a_name_inside_a_string_is_no_use(tmp_path):
    """The uses a folded row stands for are found by spelling: a message naming the function
    (`fail("set_value failed")`) is skipped, so the real calls after it are listed."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "lib.c").write_text("int set_value(int v) { return v; }\n")
    (root / "check.c").write_text(
        "int set_value(int v);\nvoid fail(const char *m);\n\nvoid check(void) {\n"
        "    if (set_value(1)) fail(\"set_value failed\");\n"
        "    fail(\"set_value with a bad argument did not fail\");\n"
        "    set_value(2);\n    set_value(3);\n}\n")
    with Workspace.open(root) as ws:
        ws.index()
        out = find_references(ws, "lib.c::set_value")
    lines = [r["line"] for r in out["references"] if r["path"] == "check.c" and r["kind"] == "call"]
    assert lines == [5, 7, 8]
    # an f-string's braces hold code: a call there is a use
    (root / "lib.py").write_text("def show(v):\n    return v\n")
    (root / "use.py").write_text("from lib import show\n\n\ndef run(x):\n    print('show me')\n"
                                 "    s = f\"{show(x)}\"\n    return show(s)\n")
    with Workspace.open(root) as ws:
        ws.index()
        out = find_references(ws, "lib.py::show")
    assert [r["line"] for r in out["references"] if r["kind"] == "call"] == [6, 7]


def test_a_member_a_type_inherits_is_found_under_the_types_name(tmp_path):
    """`Child.greet` when only `Base` defines greet, and a Ruby class's method from a module it
    includes: the definition it inherits, not "no symbol matches"."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "m.py").write_text("class Base:\n    def greet(self):\n        return 1\n\n\n"
                               "class Child(Base):\n    def own(self):\n        return 2\n")
    (root / "r.rb").write_text("module Helpers\n  def post_data\n    1\n  end\nend\n\n"
                               "class Request\n  include Helpers\nend\n")
    with Workspace.open(root) as ws:
        ws.index()
        assert [x["symbol"] for x in find_symbol(ws, "Child.greet")["symbols"]] == ["m.py::Base.greet"]
        assert [x["symbol"] for x in find_symbol(ws, "Request.post_data")["symbols"]] == ["r.rb::Helpers.post_data"]
        assert [x["symbol"] for x in find_symbol(ws, "Child.own")["symbols"]] == ["m.py::Child.own"]
        with pytest.raises(NavigationError, match="no symbol matches"):
            find_symbol(ws, "Child.missing")


def test_a_package_s_public_path_reaches_what_it_re_exports(tmp_path):
    files = {"src/pkg/__init__.py": "from .core import Engine\n",
             "src/pkg/core.py": "class Engine:\n    pass\n\n\nclass Hidden:\n    pass\n",
             "src/pkg/sub/__init__.py": "from ._impl import run_job\n",
             "src/pkg/sub/_impl.py": "def run_job():\n    return 1\n",
             "src/other.py": "def run_job():\n    return 2\n",
             "src/pkg/loose.py": "class Loose:\n    pass\n"}
    with indexed_workspace(tmp_path / "p", files) as ws:
        assert [s["symbol"] for s in find_symbol(ws, "pkg.Engine")["symbols"]] == ["src/pkg/core.py::Engine"]
        assert [s["symbol"] for s in find_symbol(ws, "pkg.sub.run_job")["symbols"]] == [
            "src/pkg/sub/_impl.py::run_job"]
        with pytest.raises(NavigationError):  # a file the package does not import
            find_symbol(ws, "pkg.Loose")


def test_when_uses_do_not_all_fit_the_production_code_nearest_the_definition_is_listed(tmp_path):
    """A widely used name: the uses that fit are those of its own package, not the examples
    and tests whose paths sort first; the list itself stays in file and line order."""
    use = "from lib.core.store import save\n\n\ndef run():\n    return save()\n"
    files = {"lib/__init__.py": "", "lib/core/__init__.py": "",
             "lib/core/store.py": "def save():\n    return 1\n\n\ndef flush():\n    return save()\n",
             "lib/core/cache.py": use, "lib/web/app.py": use,
             "a_examples/demo.py": use, "a_examples/more.py": use, "tests/test_store.py": use}
    with indexed_workspace(tmp_path / "p", files) as ws:
        out = find_references(ws, "lib/core/store.py::save", max_results=3)
        everything = find_references(ws, "lib/core/store.py::save", max_results=50)
    assert out["truncated"]
    assert [(r["path"], r["line"]) for r in out["references"]] == [
        ("lib/core/cache.py", 1), ("lib/core/cache.py", 5), ("lib/core/store.py", 6)]
    assert not everything["truncated"] and len(everything["references"]) == 11
    listed = [(r["path"], r["line"]) for r in everything["references"]]
    assert listed == sorted(listed) and listed[0][0] == "a_examples/demo.py"


def test_a_name_in_an_import_over_several_lines_is_listed_on_its_own_line(tmp_path):
    files = {"pkg/__init__.py": "",
             "pkg/gen.py": "def make_fn():\n    return 1\n\n\ndef other():\n    return 2\n",
             "pkg/use.py": "from pkg.gen import (\n    other,\n    make_fn,\n)\n\n\ndef run():\n    return make_fn()\n"}
    with indexed_workspace(tmp_path / "p", files) as ws:
        out = find_references(ws, "make_fn")
    assert [(r["line"], r["kind"], r["snippet"]) for r in out["references"]] == [
        (3, "import", "make_fn,"), (8, "call", "return make_fn()")]


def test_a_library_trait_method_is_no_use_of_the_types_own_namesake(tmp_path):
    # `impl Display for Entry { fn path }` calls the inherent `Entry::path`: that call is a use,
    # the trait method's `inherit` of the library trait is not, whatever the index has resolved.
    entry = ("use std::fmt::Display;\n\npub struct Entry { p: String }\n\n"
             "impl Entry {\n    pub fn path(&self) -> &str {\n        &self.p\n    }\n}\n\n"
             "impl Colorable for Entry {\n    fn path(&self) -> String {\n        self.path().to_owned()\n    }\n}\n")
    with indexed_workspace(tmp_path / "p", {"src/entry.rs": entry}) as ws:
        for persisted in (True, False):
            if not persisted:  # the resolution not saved in the index yet: the graph's word is taken
                with ws.store.write() as conn:
                    conn.execute("UPDATE refs SET target = NULL")
            out = find_references(ws, "src/entry.rs::Entry.path")
            assert [(r["line"], r["kind"]) for r in out["references"]] == [(13, "call")], out


def test_a_plain_name_means_the_module_level_definition_over_nested_ones(tmp_path):
    # `refs echo`: the project's own echo, not a helper of that name inside a test function.
    root = tmp_path / "p"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "utils.py").write_text("def echo(message):\n    print(message)\n")
    (root / "pkg" / "cli.py").write_text("from pkg.utils import echo\n\n\ndef main():\n    echo('hi')\n")
    (root / "tests" / "test_eof.py").write_text(
        "def test_prompt_eof():\n    def echo(text):\n        return text\n    echo('x')\n")
    with Workspace.open(root) as ws:
        ws.index()
        out = find_references(ws, "echo")
        assert out["symbol"] == "pkg/utils.py::echo"
        assert [f"{r['path']}:{r['line']}" for r in out["references"]] == ["pkg/cli.py:1", "pkg/cli.py:5"]
        found = [s["symbol"] for s in find_symbol(ws, "echo")["symbols"]]
        assert found[0] == "pkg/utils.py::echo" and "tests/test_eof.py::test_prompt_eof.echo" in found


def test_a_file_edited_after_indexing_is_read_again(python_ws):
    ws = python_ws
    service = ws.root / "app" / "auth" / "service.py"
    text = service.read_text(encoding="utf-8")
    service.write_text('"""Moved down."""\n\n\n' + text.replace('"""Authentication service."""\n', "", 1),
                       encoding="utf-8")
    st = service.stat()
    os.utime(service, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a distinct mtime on coarse clocks
    [sym] = find_symbol(ws, "AuthService.login", include_body=True)["symbols"]
    assert (sym["start_line"], sym["end_line"]) == (22, 31)
    assert sym["body"].encode() == _file_lines(ws.root, "app/auth/service.py", 22, 31)
    outline = file_outline(ws, "app/auth/service.py")
    assert outline["symbols"][0]["start_line"] == 8
    refs = find_references(ws, "app/util/crypto.py::hash_password")["references"]
    assert ("app/auth/service.py", 27) in [(r["path"], r["line"]) for r in refs]

    # A definition removed from its file is refused with the reason, never given an old range.
    service.write_text(service.read_text(encoding="utf-8").replace("def logout", "def sign_out"), encoding="utf-8")
    with pytest.raises(NavigationError, match="AuthService.logout is no longer defined in app/auth/service.py"):
        find_symbol(ws, "AuthService.logout")
    service.unlink()
    with pytest.raises(NavigationError, match="app/auth/service.py was deleted since it was indexed"):
        find_symbol(ws, "AuthService.login")
    with pytest.raises(NavigationError, match="was deleted since it was indexed"):
        file_outline(ws, "app/auth/service.py")


def test_a_file_that_became_a_symlink_outside_the_project_is_never_read(tmp_path):
    # Indexed as a plain file, then swapped for a symlink leading out of the project (itself, or
    # the folder above it): no tool reads or shows what it points at, before a watcher catches it.
    outside = tmp_path / "outside"
    (outside / "lib").mkdir(parents=True)
    (outside / "lib" / "util.py").write_text('KEY = "OUTSIDE-SECRET"\ndef shared():\n    return KEY\n')
    (outside / "lib" / "app.py").write_text('def main():\n    return "OUTSIDE-SECRET"\n')
    with indexed_workspace(tmp_path / "p", {"lib/util.py": "def shared():\n    return 1\n",
                                            "lib/app.py": "def main():\n    return 2\n"}) as ws:
        util = ws.root / "lib" / "util.py"
        util.unlink()
        util.symlink_to(outside / "lib" / "util.py")
        with pytest.raises(NavigationError, match="lib/util.py changed since it was indexed and now leads outside"):
            find_symbol(ws, "shared", include_body=True)
        with pytest.raises(NavigationError, match="now leads outside the project") as refused:
            file_outline(ws, "lib/util.py")
        assert "OUTSIDE-SECRET" not in str(refused.value) and str(outside) not in str(refused.value)
        util.unlink()
        (ws.root / "lib").rename(ws.root / "lib_old")
        (ws.root / "lib").symlink_to(outside / "lib", target_is_directory=True)
        with pytest.raises(NavigationError, match="lib/app.py changed since it was indexed and now leads outside"):
            find_symbol(ws, "main", include_body=True)


PRIVATE_TS = """export class Client {
  #retries = 0;

  async fetch(url: string): Promise<string> {
    try {
      return await this.#send(url);
    } catch (error) {
      return this.#retry(url, error);
    }
  }

  async #send(url: string): Promise<string> {
    return url;
  }

  async #retry(url: string, error: unknown): Promise<string> {
    this.#retries += 1;
    return this.#send(url);
  }
}
"""


def test_private_members_are_found_by_every_spelling(tmp_path):
    # A JavaScript/TypeScript private member's "#" is part of its name, not a separator
    # (Ruby's `A#m` is one): every spelling an agent uses reaches it, with or without the "#".
    root = tmp_path / "ts_private"
    (root / "src").mkdir(parents=True)
    (root / "src" / "client.ts").write_text(PRIVATE_TS)
    with Workspace.open(root) as ws:
        ws.index()
        want = "src/client.ts::Client.#retry"
        for spelling in ("Client.#retry", "#retry", "src/client.ts::Client.#retry", "client.ts::Client.#retry",
                         "Client.retry", "Client.#ret*", "#ret*"):
            found = [s["symbol"] for s in find_symbol(ws, spelling)["symbols"]]
            assert found[:1] == [want], spelling
        uses = find_references(ws, "Client.#send")["references"]
        assert sorted((u["line"], u["symbol"]) for u in uses) == [
            (6, "src/client.ts::Client.fetch"), (18, "src/client.ts::Client.#retry")]


def test_a_question_naming_a_private_member_seeds_it(tmp_path):
    from memstrata.compressor import context_query
    from memstrata.compressor.analyze import _tokens

    assert [t.parts for t in _tokens("Client.#retry and A#m") if len(t.parts) > 1] == [["Client", "#retry"],
                                                                                      ["A", "m"]]
    root = tmp_path / "ts_private"
    (root / "src").mkdir(parents=True)
    (root / "src" / "client.ts").write_text(PRIVATE_TS + "".join(
        f"\nexport function helper{i}(value: number): number {{\n  return value * {i};\n}}\n" for i in range(40)))
    with Workspace.open(root) as ws:
        ws.index()
        out = context_query(ws, "why does Client.#retry count twice", max_tokens=300)
    assert "this.#retries += 1;" in out.context


def test_a_dotted_module_path_reaches_module_level_definitions(python_ws):
    # `pkg.mod.func`: the module path is the file's, the last part a module-level definition.
    for spelling in ("app.util.crypto.hash_password", "util.crypto.hash_password"):
        assert [s["symbol"] for s in find_symbol(python_ws, spelling)["symbols"]] == \
            ["app/util/crypto.py::hash_password"], spelling
    assert find_references(python_ws, "app.util.crypto.hash_password")["symbol"] == "app/util/crypto.py::hash_password"
    for wrong in ("app.crypto.hash_password", "app.hash_password", "util.hash_password"):
        with pytest.raises(NavigationError):  # no such module: the path must end with it
            find_symbol(python_ws, wrong)
    # A method under its module path resolves as before.
    assert [s["symbol"] for s in find_symbol(python_ws, "app.auth.service.AuthService.login")["symbols"]] == \
        ["app/auth/service.py::AuthService.login"]


def test_uses_no_definition_is_credited_with_are_counted_not_listed(tmp_path):
    root = tmp_path / "two_runs"
    root.mkdir()
    (root / "jobs.py").write_text("class Job:\n    def run(self):\n        return 1\n\n    def twice(self):\n"
                                  "        return self.run() + self.run()\n\n\nclass Task:\n    def run(self):\n"
                                  "        return 2\n")
    (root / "main.py").write_text("def go(thing, other):\n    thing.run()\n    other.run()\n    return thing.run()\n")
    with Workspace.open(root) as ws:
        ws.index()
        out = find_references(ws, "Job.run")
    # self.run() in Job is Job.run's; thing.run() could be either class's: counted, not guessed.
    assert [(r["path"], r["line"], r["symbol"]) for r in out["references"]] == [("jobs.py", 6, "jobs.py::Job.twice")]
    assert out["unattributed"] == 3


def test_a_call_through_an_import_alias_is_a_use(tmp_path):
    from ..conftest import indexed_workspace

    ws = indexed_workspace(tmp_path / "alias", {
        "pkg/__init__.py": "",
        "pkg/cells.py": "def cell_len(text):\n    return len(text)\n",
        "pkg/measure.py": "from .cells import cell_len as measure\n\n\ndef width(t):\n    return measure(t) + 1\n",
    })
    try:
        got = {(r["path"], r["line"], r["kind"]) for r in find_references(ws, "cell_len")["references"]}
        assert got == {("pkg/measure.py", 1, "import"), ("pkg/measure.py", 5, "call")}
        # The same once the file changed after indexing (its uses read from the new text).
        edited = tmp_path / "alias/pkg/measure.py"
        edited.write_text("# moved down a line\n" + edited.read_text())
        got = {(r["path"], r["line"], r["kind"]) for r in find_references(ws, "cell_len")["references"]}
        assert ("pkg/measure.py", 6, "call") in got
    finally:
        ws.close()


def test_a_name_in_a_comment_is_no_use(tmp_path):
    from ..conftest import indexed_workspace

    ws = indexed_workspace(tmp_path / "comment", {
        "tool.py": "def reduce_all(x):\n    return x\n\n\ndef run(x):\n    y = reduce_all(x)\n"
                   "    # apply reduce_all to what is left\n    return reduce_all(y)\n",
    })
    try:
        got = [(r["line"], r["kind"]) for r in find_references(ws, "reduce_all")["references"]]
        assert got == [(6, "call"), (8, "call")]
    finally:
        ws.close()


def test_a_name_qualified_by_a_namespace_that_is_no_symbol(tmp_path):
    files = {"src/Routing/Route.php": "<?php\nnamespace Slim\\Routing;\nclass Route {\n    public function run() {}\n}\n",
             "include/ui/widget.hpp": "namespace ui {\nclass Widget {\npublic:\n    int get() const { return 1; }\n};\n}\n",
             "pkg/tools.py": "def run():\n    return 1\n"}
    with indexed_workspace(tmp_path / "p", files) as ws:
        for name in ("Slim\\Routing\\Route", "\\Slim\\Routing\\Route", "Slim\\Routing\\Route::run"):
            got = [s["symbol"] for s in find_symbol(ws, name)["symbols"]]
            assert got == ["src/Routing/Route.php::Route" + (".run" if name.endswith("run") else "")], name
        assert [s["symbol"] for s in find_symbol(ws, "ui::Widget::get")["symbols"]] == [
            "include/ui/widget.hpp::Widget.get"]
        # Python's modules are symbols' paths: a module that is not there names nothing.
        with pytest.raises(NavigationError):
            find_symbol(ws, "elsewhere.run")
        # A dotted name is no C++ or PHP spelling: it does not land on their definitions.
        with pytest.raises(NavigationError):
            find_symbol(ws, "os.path.Widget")
        with pytest.raises(NavigationError):
            find_symbol(ws, "Other\\Ns\\Widget")  # a PHP spelling, and Widget is C++'s


def test_a_cpp_type_use_means_the_class_not_its_constructor(tmp_path):
    files = {"widget.h": "#pragma once\nnamespace ui {\ntemplate <typename T>\nclass Widget {\npublic:\n"
                         "    Widget(T v) : v_(v) {}\n    T get() const { return v_; }\nprivate:\n    T v_;\n};\n}\n",
             "main.cpp": '#include "widget.h"\nint main() {\n    ui::Widget<int> w(3);\n    return w.get();\n}\n'}
    with indexed_workspace(tmp_path / "p", files) as ws:
        out = find_references(ws, "widget.h::Widget")
    assert [(r["path"], r["line"], r["kind"]) for r in out["references"]] == [("main.cpp", 3, "type")]


def test_a_default_import_is_listed_as_a_named_import_is(tmp_path):
    # `import Foo from './foo'` imports Foo as plainly as `import { Bar } from './foo'` imports
    # Bar (and Python's `from pkg.gen import make_fn` make_fn): its line is a use, under whatever
    # name the importer gives it, for a class declared `export default` and for a name an
    # `export default toRem` exports; a file edited since indexing is read again.
    files = {
        "src/foo.ts": "export default class Foo {\n  run(): number {\n    return 1\n  }\n}\n"
                      "export class Bar {\n  go(): number {\n    return 2\n  }\n}\n",
        "src/helper.ts": "function toRem(px: number): string {\n  return `${px / 16}rem`\n}\nexport default toRem\n",
        "src/main.ts": "import Foo from './foo'\nimport { Bar } from './foo'\nimport toRem from './helper'\n\n"
                       "export function main(): string {\n  const f = new Foo()\n  const b = new Bar()\n"
                       "  return toRem(f.run() + b.go())\n}\n",
        "src/other.ts": "import {\n  Bar as B,\n} from './foo'\nimport Renamed from './foo'\n\n"
                        "export function other(): number {\n  return new Renamed().run() + new B().go()\n}\n",
    }

    def listed(ws, name):
        return [(r["path"], r["line"], r["kind"]) for r in find_references(ws, name)["references"]]

    with indexed_workspace(tmp_path / "p", files) as ws:
        assert listed(ws, "Bar") == [("src/main.ts", 2, "import"), ("src/main.ts", 7, "call"),
                                     ("src/other.ts", 2, "import"), ("src/other.ts", 7, "call")]
        assert listed(ws, "Foo") == [("src/main.ts", 1, "import"), ("src/main.ts", 6, "call"),
                                     ("src/other.ts", 4, "import"), ("src/other.ts", 7, "call")]
        assert listed(ws, "toRem") == [("src/helper.ts", 4, "export"), ("src/main.ts", 3, "import"), ("src/main.ts", 8, "call")]
        other = tmp_path / "p/src/other.ts"
        other.write_text("// moved down a line\n" + other.read_text())
        assert ("src/other.ts", 5, "import") in listed(ws, "Foo")


def test_exporting_a_name_is_listed_and_so_are_imports_of_a_default_that_re_exports_it(tmp_path):
    # `export default toRem` (of the module's own toRem, or one it imported) is a use of toRem;
    # `import rem from './utils'` of a module whose default is the imported toRem imports toRem
    # as plainly as `import toRem from './helper'` does, under the importer's name.
    files = {
        "src/utils/size.ts": "export function toRem(px: number): string {\n  return `${px / 16}rem`\n}\n",
        "src/utils/index.ts": "import { toRem } from './size'\nexport default toRem\n",
        "src/use.ts": "import rem from './utils'\n\nexport function a(): string {\n  return rem(1)\n}\n",
        "src/helper.ts": "function toPx(px: number): string {\n  return `${px}px`\n}\nexport { toPx as px }\nexport default toPx\n",
        "src/list.ts": "import px from './helper'\n\nexport const units = [px]\n",
    }

    def listed(ws, name):
        return [(r["path"], r["line"], r["kind"]) for r in find_references(ws, name)["references"]]

    with indexed_workspace(tmp_path / "p", files) as ws:
        assert listed(ws, "src/utils/size.ts::toRem") == [
            ("src/use.ts", 1, "import"), ("src/use.ts", 4, "call"),
            ("src/utils/index.ts", 1, "import"), ("src/utils/index.ts", 2, "export")]
        assert listed(ws, "toPx") == [("src/helper.ts", 4, "export"), ("src/helper.ts", 5, "export"),
                                      ("src/list.ts", 1, "import")]


def test_find_symbol_shows_a_signature_without_the_comments_that_open_the_body(tmp_path):
    files = {"app/loader.py": (
        "def load(path, strict=False):  # the slow path\n"
        "    # First, read the project's own settings,\n"
        "    # then the user's.\n"
        "    return open(path).read()\n")}
    with indexed_workspace(tmp_path, files) as ws:
        [found] = find_symbol(ws, "load")["symbols"]
    assert found["signature"] == "def load(path, strict=False):"


def test_a_body_after_a_form_feed_or_a_line_separator_is_its_own_lines(tmp_path):
    # only "\n" ends a line, as in the parser's rows: a page break (form feed) between
    # definitions, or U+2028 inside a string, moves no line of what follows
    files = {
        "pages.py": "def first():\n    return 1\n\x0c\ndef second(x):\n    y = x + 1\n    return first() + y\n",
        "sep.js": "const s = 'a\u2028b';\nfunction later(x) {\n  const y = x + 1;\n  return y;\n}\n",
    }
    with indexed_workspace(tmp_path, files) as ws:
        second = find_symbol(ws, "pages.py::second", include_body=True)["symbols"][0]
        assert (second["start_line"], second["end_line"]) == (4, 6)
        assert second["body"] == "def second(x):\n    y = x + 1\n    return first() + y"
        later = find_symbol(ws, "sep.js::later", include_body=True)["symbols"][0]
        assert later["body"] == "function later(x) {\n  const y = x + 1;\n  return y;\n}"
