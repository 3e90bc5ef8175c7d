"""CodeGraph API semantics: neighbours, definitions, incremental refresh and
the order in which references are resolved."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from memstrata.indexer.graph import CodeGraph, Neighbor
from memstrata.indexer.workspace import Workspace

from ..conftest import write_files

LOGIN = "app/auth/service.py::AuthService.login"
AUTH = "app/auth/service.py::AuthService"


def edges(graph: CodeGraph) -> set[tuple]:
    return {(u, v, k, w) for u, v, k, w in graph.g.edges(keys=True, data="weight")}


@pytest.fixture
def project(project_copy):
    return project_copy("python_project")


@pytest.fixture
def ws(project):
    with Workspace.open(project, workers=1) as ws:
        ws.index()
        yield ws


# -- neighbours ---------------------------------------------------------------------


def test_neighbors_filter_by_kind_and_direction(ws):
    g = ws.graph
    out = set(g.neighbors(LOGIN, direction="out"))
    assert out == {
        Neighbor("app/auth/base.py::BaseService.audit", "calls", 1.0, True),
        Neighbor("app/auth/service.py::InvalidCredentials", "calls", 1.0, True),
        Neighbor("app/util/crypto.py::constant_time_eq", "calls", 1.0, True),
        Neighbor("app/util/crypto.py::hash_password", "calls", 1.0, True),
    }
    assert set(g.neighbors(LOGIN, kinds=["contains"], direction="in")) == {Neighbor(AUTH, "contains", 1.0, False)}
    both = set(g.neighbors(LOGIN))
    assert both == out | set(g.neighbors(LOGIN, direction="in"))
    assert {n.node for n in g.neighbors(LOGIN, kinds=["calls"], direction="in")} == {
        "app/routes.py::login_route", "app/session.py::SessionMiddleware.__call__",
        "tests/test_auth.py::test_login_accepts_right_password"}
    assert set(g.neighbors(LOGIN, kinds=["inherits", "imports"])) == set()
    # A class: contains its methods, inherits its base, is called (constructed) by others.
    assert {(n.node, n.kind) for n in g.neighbors(AUTH, kinds=["contains", "inherits"], direction="out")} == {
        ("app/auth/service.py::AuthService.__init__", "contains"),
        ("app/auth/service.py::AuthService.login", "contains"),
        ("app/auth/service.py::AuthService.logout", "contains"),
        ("app/auth/base.py::BaseService", "inherits"),
    }
    # Files: contains their top-level symbols, imports edges weighted by imported names.
    assert set(g.neighbors("app/auth/service.py", kinds=["imports"], direction="out")) == {
        Neighbor("app/util/crypto.py", "imports", 2.0, True),  # hash_password, constant_time_eq
        Neighbor("app/auth/base.py", "imports", 1.0, True),
    }
    assert {n.node for n in g.neighbors("app/util/crypto.py", kinds=["contains"], direction="out")} == {
        "app/util/crypto.py::SALT", "app/util/crypto.py::hash_password", "app/util/crypto.py::constant_time_eq"}


def test_definitions_and_node_data(ws):
    g = ws.graph
    assert g.definitions("login") == [LOGIN]
    assert g.definitions("__init__") == ["app/auth/service.py::AuthService.__init__",
                                         "app/session.py::SessionMiddleware.__init__"]
    assert g.definitions("no_such_name") == []
    data = g.node(LOGIN)
    assert (data["kind"], data["path"], data["qualname"], data["name"]) == (
        "method", "app/auth/service.py", "AuthService.login", "login")
    assert g.file_of(LOGIN) == "app/auth/service.py"
    assert g.node("tests/test_auth.py")["is_test"] is True
    assert g.node("app/routes.py")["is_test"] is False
    assert g.node_for_db_id(data["db_id"]) == LOGIN
    assert sorted(g.symbols_in_file("app/auth/base.py")) == [
        "app/auth/base.py::BaseService", "app/auth/base.py::BaseService.audit"]
    assert g.stats()["files"] == 10 and g.stats()["symbols"] == 21


# -- refresh == load ----------------------------------------------------------------------


def apply(ws, graph: CodeGraph, paths: list[str]) -> None:
    summary = ws.indexer.update_paths(paths)
    graph.refresh(ws.store, summary.changed_paths, summary.removed_paths)


@contextmanager
def indexed_graph(root: Path):
    """An indexed workspace over ``root`` and a full graph loaded from it, to refresh and compare."""
    with Workspace.open(root, workers=1) as w:
        w.index()
        yield w, CodeGraph.load(w.store)


def _edit(w, g, root, files: dict[str, str | None]) -> None:
    """Write (or, for None, delete) ``files`` under ``root`` and refresh ``g`` with them."""
    for rel, text in files.items():
        if text is None:
            (root / rel).unlink()
        else:
            write_files(root, {rel: text})
    apply(w, g, list(files))


def assert_same_as_fresh(ws, graph: CodeGraph) -> None:
    fresh = CodeGraph.load(ws.store)
    mine, theirs = edges(graph), edges(fresh)
    assert mine == theirs, {"only incremental": sorted(mine - theirs), "only fresh": sorted(theirs - mine)}
    assert set(graph.g.nodes) == set(fresh.g.nodes)


def test_refresh_after_modifying_an_imported_file(ws, project):
    g = CodeGraph.load(ws.store)
    crypto = project / "app/util/crypto.py"
    crypto.write_text(crypto.read_text().replace("def constant_time_eq(", "def safe_eq("))
    apply(ws, g, ["app/util/crypto.py"])
    assert "app/util/crypto.py::safe_eq" in g
    assert g.importers("app/util/crypto.py") == ["app/auth/service.py", "tests/test_auth.py"]
    assert_same_as_fresh(ws, g)


def test_refresh_after_modifying_a_caller(ws, project):
    g = CodeGraph.load(ws.store)
    routes = project / "app/routes.py"
    routes.write_text(routes.read_text().replace("service.logout(request[\"user\"])", "service.login('x', 'y')"))
    apply(ws, g, ["app/routes.py"])
    assert "app/routes.py::logout_route" in g.callers(LOGIN)
    assert g.callers("app/auth/service.py::AuthService.logout") == []
    assert_same_as_fresh(ws, g)


def test_refresh_after_deleting_and_recreating_a_file(ws, project):
    g = CodeGraph.load(ws.store)
    session = project / "app/session.py"
    text = session.read_text()
    session.unlink()
    apply(ws, g, ["app/session.py"])
    assert "app/session.py" not in g
    assert_same_as_fresh(ws, g)
    session.write_text(text)
    apply(ws, g, ["app/session.py"])
    assert g.importers("app/session.py") == ["app/routes.py"]
    assert_same_as_fresh(ws, g)


def test_refresh_when_a_new_file_makes_a_name_ambiguous(ws, project):
    g = CodeGraph.load(ws.store)
    # Every caller of login calls it on an instance (`service.login`,
    # `self.auth.login`, `svc.login`) whose type the graph does not infer: only
    # the unique-name fallback resolves them. A second `login` makes the name
    # ambiguous, and ambiguous references are left unresolved, not guessed.
    callers = g.callers(LOGIN)
    assert len(callers) == 3
    (project / "app/oauth.py").write_text("class OAuth:\n    def login(self, token):\n        return token\n")
    apply(ws, g, ["app/oauth.py"])
    assert g.callers(LOGIN) == []
    assert g.callers("app/oauth.py::OAuth.login") == []
    assert_same_as_fresh(ws, g)
    (project / "app/oauth.py").unlink()
    apply(ws, g, ["app/oauth.py"])
    assert g.callers(LOGIN) == callers
    assert_same_as_fresh(ws, g)


def test_refresh_when_a_type_of_the_same_name_appears_on_the_spelled_path(tmp_path):
    # Which `Channel` a path-spelled call means is decided among the types that have the method,
    # so a new namesake without it changes nothing, incrementally or from scratch.
    root = write_files(tmp_path / "paths", {
        "src/lib.rs": "pub mod flavors;\npub mod x;\n",
        "src/flavors/mod.rs": "pub mod tick;\npub mod array;\n",
        "src/flavors/tick.rs": "pub struct Channel;\n\nimpl Channel {\n    pub fn new() -> Channel {\n        Channel\n    }\n}\n",
        "src/flavors/array.rs": "pub struct Channel;\n\nimpl Channel {\n    pub fn new() -> Channel {\n        Channel\n    }\n}\n",
        "src/user.rs": "pub fn make() {\n    crate::x::flavors::tick::Channel::new();\n}\n",
    })
    with indexed_graph(root) as (w, g):
        assert g.callees("src/user.rs::make") == ["src/flavors/tick.rs::Channel.new"]
        write_files(root, {"src/x/flavors/tick.rs": "pub struct Channel;\n"})
        apply(w, g, ["src/x/flavors/tick.rs"])
        assert g.callees("src/user.rs::make") == ["src/flavors/tick.rs::Channel.new"]
        assert_same_as_fresh(w, g)


def test_refresh_when_a_missing_module_appears(ws, project):
    g = CodeGraph.load(ws.store)
    (project / "app/reports.py").write_text(
        "from app.exporters import export_csv\n\n\ndef monthly_report(rows):\n    return export_csv(rows)\n")
    apply(ws, g, ["app/reports.py"])
    assert g.imported_files("app/reports.py") == []
    (project / "app/exporters.py").write_text("def export_csv(rows):\n    return ','.join(rows)\n")
    apply(ws, g, ["app/exporters.py"])
    assert g.imported_files("app/reports.py") == ["app/exporters.py"]
    assert g.callees("app/reports.py::monthly_report") == ["app/exporters.py::export_csv"]
    assert_same_as_fresh(ws, g)


def test_refresh_of_a_file_many_calls_reach_through_receivers_and_aliases(tmp_path):
    # One caller reaches `Table.add_row` through several references (receivers, counts), and
    # another through an import alias that spells no name the file defines.  Editing the file
    # that defines them must leave every weight and edge as a fresh build has them.
    root = write_files(tmp_path / "weights", {
        "lib/__init__.py": "",
        "lib/table.py": "class Table:\n    def add_row(self, *cells):\n        return cells\n\n\n"
                        "def install():\n    return Table()\n",
        "app.py": "from lib.table import Table\nfrom lib.table import install as setup\n\n\n"
                  "def card():\n    a = Table()\n    b = Table()\n    a.add_row(1)\n"
                  + "    b.add_row(2)\n" * 9 + "    a.add_row(3)\n    setup()\n",
    })
    with indexed_graph(root) as (w, g):
        before = edges(g)
        assert ("app.py::card", "lib/table.py::install", "calls", 1.0) in before
        _edit(w, g, root, {"lib/table.py": "# an edit above everything\n" + (root / "lib/table.py").read_text()})
        assert_same_as_fresh(w, g)
        assert edges(g) == before
        apply(w, g, ["lib/table.py"])  # again, with the reverse index built by the first refresh
        assert_same_as_fresh(w, g)


def test_refresh_when_what_a_declared_type_means_changes(tmp_path):
    # `x: Writer; x.send()` carries the name `send`, not `Writer`: a second `Writer` appearing,
    # then going, must still move the call, as a fresh build does.
    root = write_files(tmp_path / "typed", {
        "a.py": "class Writer:\n    def send(self):\n        pass\n",
        "other.py": "class Other:\n    def send(self):\n        pass\n",
        "use.py": "def go(x: Writer):\n    x.send()\n",
    })
    with indexed_graph(root) as (w, g):
        assert g.callees("use.py::go") == ["a.py::Writer.send"]
        _edit(w, g, root, {"b.py": "class Writer:\n    pass\n"})
        assert g.callees("use.py::go") == []
        assert_same_as_fresh(w, g)
        _edit(w, g, root, {"b.py": None})
        assert g.callees("use.py::go") == ["a.py::Writer.send"]
        assert_same_as_fresh(w, g)


def test_refresh_keeps_a_call_reached_through_a_base_class_whatever_the_order(tmp_path):
    # Editing base.py takes both w.py's `inherits` edge and a_use.py's call with it; the call is
    # found through the inheritance, so links are resolved before uses, in a refresh as in a load.
    root = write_files(tmp_path / "order", {
        "base.py": "class Base:\n    def send(self):\n        pass\n",
        "other.py": "class Other:\n    def send(self):\n        pass\n",
        "w.py": "from base import Base\n\nclass Writer(Base):\n    pass\n",
        "a_use.py": "from w import Writer\n\ndef go(x: Writer):\n    x.send()\n",
    })
    with indexed_graph(root) as (w, g):
        assert g.callees("a_use.py::go") == ["base.py::Base.send"]
        _edit(w, g, root, {"base.py": "class Base:\n    def send(self):\n        pass\n# comment\n"})
        assert g.callees("a_use.py::go") == ["base.py::Base.send"]
        assert_same_as_fresh(w, g)


def test_refresh_when_an_aliased_import_gains_its_definition(tmp_path):
    root = write_files(tmp_path / "alias", {
        "w.py": "class Writer:\n    pass\n",
        "use.py": "from w import Writer as W\n\n\ndef go():\n    return W()\n",
    })
    with indexed_graph(root) as (w, g):
        assert g.callees("use.py::go") == ["w.py::Writer"]
        _edit(w, g, root, {"w.py": "def other():\n    pass\n"})
        assert g.callees("use.py::go") == []
        _edit(w, g, root, {"w.py": "class Writer:\n    pass\n"})
        assert g.callees("use.py::go") == ["w.py::Writer"]
        assert_same_as_fresh(w, g)


def test_a_csharp_type_named_like_a_property_of_that_type_is_the_type(tmp_path):
    root = write_files(tmp_path / "color", {
        "Color.cs": "public enum Color { Red, Blue }\n",
        "Car.cs": "public class Car\n{\n    public Color Color { get; set; }\n"
                  "    public void Paint(Color c) { }\n}\n",
    })
    with Workspace.open(root, workers=1) as w:
        w.index()
        users = {n.node for n in w.graph.neighbors("Color.cs::Color", ("references",), "in")}
        assert users == {"Car.cs::Car.Color", "Car.cs::Car.Paint"}


# -- resolution order -----------------------------------------------------------------------

RESOLUTION_PROJECT = {
    "pkg/__init__.py": "",
    "pkg/base.py": (
        "class Base:\n"
        "    def helper(self):\n        return 1\n\n"
        "    def shadowed(self):\n        return 0\n"
    ),
    "pkg/child.py": (
        "from pkg.base import Base\n\n\n"
        "class Child(Base):\n"
        "    def run(self):\n"
        "        self.helper()\n"
        "        self.own()\n"
        "        return self.shadowed()\n\n"
        "    def own(self):\n        return 2\n\n"
        "    def shadowed(self):\n        return 3\n"
    ),
    "pkg/a.py": "def dup():\n    return 'a'\n",
    "pkg/b.py": "def dup():\n    return 'b'\n",
    "pkg/c.py": "def only_one():\n    return 'c'\n",
    "pkg/user.py": (
        "import pkg.b as mb\n"
        "from pkg import b\n"
        "from pkg.a import dup\n"
        "from pkg.b import dup as bdup\n\n\n"
        "def use_from_import():\n    return dup()\n\n\n"
        "def use_alias():\n    return bdup()\n\n\n"
        "def use_module_alias():\n    return mb.dup()\n\n\n"
        "def use_submodule():\n    return b.dup()\n\n\n"
        "def use_unique():\n    return only_one()\n"
    ),
    "pkg/other.py": (
        "def use_ambiguous():\n    return dup()\n\n\n"
        "def local_name():\n    return 1\n\n\n"
        "def use_local():\n    return local_name()\n"
    ),
    "pkg/shadow.py": "def dup():\n    return 'mine'\n\n\ndef use_own_dup():\n    return dup()\n",
    "pkg/store.py": (
        "class Store:\n"
        "    def keys(self):\n        return []\n\n\n"
        "def use_value_receiver(s):\n    return s.keys()\n\n\n"
        "def use_foreign_type(d):\n    return Mapping.keys(d), str.join(',', d)\n"
    ),
    # Several modules define a type of one name; the path a call spells says which.
    "src/flavors/mod.rs": "pub mod tick;\npub mod array;\n",
    "src/flavors/tick.rs": "pub struct Channel;\n\nimpl Channel {\n    pub fn new() -> Channel {\n        Channel\n    }\n}\n",
    "src/flavors/array.rs": "pub struct Channel;\n\nimpl Channel {\n    pub fn new() -> Channel {\n        Channel\n    }\n}\n",
    "src/channel.rs": (
        "use crate::flavors;\n\n"
        "pub fn tick() {\n    flavors::tick::Channel::new();\n}\n\n"
        "pub fn array() {\n    crate::flavors::array::Channel::new();\n}\n\n"
        "pub fn either() {\n    Channel::new();\n}\n\n"
        "pub fn uses_test_helper() {\n    only_in_tests();\n    inline_helper();\n}\n\n"
        "#[cfg(test)]\nmod tests {\n    fn inline_helper() {}\n\n    fn uses_fixture() {\n        make_fixture();\n    }\n}\n"
    ),
    "src/testutil/mod.rs": "pub fn make_fixture() {}\n",
    # A name defined only by test code: the tests' own calls find it, production code's do not.
    "tests/helpers.rs": "pub fn only_in_tests() {}\n",
    "tests/it.rs": "fn calls_helper() {\n    only_in_tests();\n}\n",
    # A Go field named like its type: `s.conn.Write()` is `conn`'s Write.
    "srv/conn.go": "package srv\n\ntype conn struct{}\n\nfunc (c *conn) Write(b []byte) {}\n",
    "srv/file.go": "package srv\n\ntype file struct{}\n\nfunc (f *file) Write(b []byte) {}\n",
    "srv/server.go": "package srv\n\ntype Server struct {\n\tconn *conn\n}\n\nfunc (s *Server) Send(b []byte) {\n\ts.conn.Write(b)\n}\n",
    # Calls a name alone cannot reach: a parameter called bare, a method called without a
    # receiver, a call on a library's module (the project's one namesake is not it).
    "lib/ctx.ts": "export class KeywordCtx {\n  fail(message: string): void {}\n}\n",
    "lib/parse.ts": (
        'import * as assert from "assert";\nimport { KeywordCtx } from "./ctx";\n\n'
        'export function parseToken(fail: (m: string) => void) {\n  fail("bad token");\n}\n\n'
        'export function report(cxt: KeywordCtx) {\n  cxt.fail("bad value");\n}\n\n'
        'export function check() {\n  assert.fail("unreachable");\n}\n'
    ),
    "pkg/checks.py": (
        "import pytest\n\n\n"
        "class Checker:\n    def skip(self):\n        return None\n\n\n"
        "def use_library():\n    pytest.skip()\n\n\n"
        "def use_bare():\n    skip()\n\n\n"
        "def use_value(c):\n    c.skip()\n"
    ),
    # An instance spelled like a type (`Q = AssumptionKeys()`): `Q.finite()` is a value's call.
    "pkg/keys.py": "class AssumptionKeys:\n    def finite(self):\n        return 1\n\n\nQ = AssumptionKeys()\n",
    "pkg/ask.py": "from pkg.keys import Q\n\n\ndef ask_finite():\n    return Q.finite()\n",
    # One top-level `open` and one `escape` in the project: a builtin and a library's name.
    "pkg/files.py": "def open(path):\n    return path\n\n\ndef escape(text):\n    return text\n",
    # A relative import the resolver cannot place is still the project's: its name may be
    # found by uniqueness as before.
    "pkg/relative.py": "from .nowhere import only_one\n\n\ndef use_relative():\n    return only_one()\n",
    "pkg/reader.py": (
        "from html import escape\n\n\n"
        "def read(p):\n    return open(p)\n\n\n"
        "def quoted(t):\n    return escape(t)\n"
    ),
    "logx/errors.go": (
        "package logx\n\nimport \"fmt\"\n\n"
        "type wrapped struct{}\n\nfunc (w *wrapped) Errorf(format string) error { return nil }\n\n"
        "func Wrap(err error) error {\n\treturn fmt.Errorf(\"wrap: %w\", err)\n}\n"
    ),
    "src/code.rs": (
        "pub enum Code { Ok, Failed }\n\n"
        "impl From<Code> for i32 {\n    fn from(code: Code) -> Self {\n        0\n    }\n}\n\n"
        "pub fn as_number(c: Code) -> i32 {\n    i32::from(c)\n}\n\n"
        "pub fn as_path() -> std::path::PathBuf {\n    std::path::PathBuf::from(String::from(\"x\"))\n}\n"
    ),
}


@pytest.fixture(scope="module")
def resolution(tmp_path_factory):
    root: Path = write_files(tmp_path_factory.mktemp("resolution"), RESOLUTION_PROJECT)
    with Workspace.open(root, workers=1) as ws:
        ws.index()
        yield ws


def callees(ws, node: str) -> list[str]:
    return ws.graph.callees(node)


def test_self_method_resolves_to_enclosing_class_then_bases(resolution):
    assert callees(resolution, "pkg/child.py::Child.run") == [
        "pkg/base.py::Base.helper",  # found in the base class
        "pkg/child.py::Child.own",  # the enclosing class
        "pkg/child.py::Child.shadowed",  # the override wins over Base.shadowed
    ]
    assert resolution.graph.bases("pkg/child.py::Child") == ["pkg/base.py::Base"]


def test_from_import_binding_beats_ambiguity(resolution):
    # dup is defined in a.py, b.py and shadow.py; the import says which.
    assert callees(resolution, "pkg/user.py::use_from_import") == ["pkg/a.py::dup"]


def test_aliased_from_import(resolution):
    assert callees(resolution, "pkg/user.py::use_alias") == ["pkg/b.py::dup"]


def test_module_alias_receiver(resolution):
    assert callees(resolution, "pkg/user.py::use_module_alias") == ["pkg/b.py::dup"]


def test_submodule_imported_from_package(resolution):
    # `from pkg import b` binds the module pkg/b.py; `b.dup()` is its function.
    assert callees(resolution, "pkg/user.py::use_submodule") == ["pkg/b.py::dup"]


def test_unique_name_fallback(resolution):
    assert callees(resolution, "pkg/user.py::use_unique") == ["pkg/c.py::only_one"]


def test_a_call_on_a_type_the_project_lacks_is_not_its_one_namesake(resolution):
    # A value's type is unknown, so the one `keys` in the project is the best guess;
    # `Mapping.keys`, `PathBuf::from`, `String::from` name types the project does not define.
    assert callees(resolution, "pkg/store.py::use_value_receiver") == ["pkg/store.py::Store.keys"]
    assert callees(resolution, "pkg/store.py::use_foreign_type") == []
    assert callees(resolution, "src/code.rs::as_path") == []
    # `impl From<Code> for i32` defines i32's `from`, and `i32::from` calls it.
    assert callees(resolution, "src/code.rs::as_number") == ["src/code.rs::i32.from"]


def test_a_type_named_through_its_module_path_is_that_modules(resolution):
    assert callees(resolution, "src/channel.rs::tick") == ["src/flavors/tick.rs::Channel.new"]
    assert callees(resolution, "src/channel.rs::array") == ["src/flavors/array.rs::Channel.new"]
    assert callees(resolution, "src/channel.rs::either") == []  # no path: still ambiguous


def test_production_code_never_links_to_a_test_namesake_by_name(resolution):
    assert callees(resolution, "src/channel.rs::uses_test_helper") == []
    # Test code does: a test file's, and a source file's inline test module's.
    assert callees(resolution, "tests/it.rs::calls_helper") == ["tests/helpers.rs::only_in_tests"]
    assert callees(resolution, "src/channel.rs::tests.uses_fixture") == ["src/testutil/mod.rs::make_fixture"]


def test_a_name_alone_does_not_reach_what_needs_a_receiver_or_an_import(resolution):
    # A bare call in these languages reaches what is in scope, never another class's method.
    assert callees(resolution, "lib/parse.ts::parseToken") == []
    assert callees(resolution, "pkg/checks.py::use_bare") == []
    # A call on a library's module is the library's, whatever the project defines by that name.
    assert callees(resolution, "lib/parse.ts::check") == []
    assert callees(resolution, "pkg/checks.py::use_library") == []
    assert callees(resolution, "logx/errors.go::Wrap") == []
    assert callees(resolution, "pkg/reader.py::read") == []  # the builtin open()
    assert callees(resolution, "pkg/reader.py::quoted") == []  # html's escape
    assert callees(resolution, "pkg/relative.py::use_relative") == ["pkg/c.py::only_one"]
    # A value whose type the index cannot know still means the one method of that name.
    assert callees(resolution, "lib/parse.ts::report") == ["lib/ctx.ts::KeywordCtx.fail"]
    assert callees(resolution, "pkg/checks.py::use_value") == ["pkg/checks.py::Checker.skip"]
    assert callees(resolution, "pkg/ask.py::ask_finite") == ["pkg/keys.py::AssumptionKeys.finite"]


def test_a_member_spelled_like_its_receiver(resolution):
    assert callees(resolution, "srv/server.go::Server.Send") == ["srv/conn.go::conn.Write"]


def test_own_definition_beats_global_names(resolution):
    assert callees(resolution, "pkg/shadow.py::use_own_dup") == ["pkg/shadow.py::dup"]
    assert callees(resolution, "pkg/other.py::use_local") == ["pkg/other.py::local_name"]


def test_ambiguous_name_stays_unresolved(resolution):
    assert callees(resolution, "pkg/other.py::use_ambiguous") == []
    rows = resolution.store.execute(
        "SELECT r.target FROM refs r JOIN files f ON f.id = r.file_id "
        "WHERE f.path = 'pkg/other.py' AND r.scope = 'use_ambiguous'")
    assert rows == [(None,)]
    assert sorted(resolution.graph.callers("pkg/a.py::dup")) == ["pkg/user.py::use_from_import"]


SUPER_PROJECT = {
    "app/base.py": "class Base:\n    def save(self):\n        return 1\n",
    "app/child.py": (
        "from app.base import Base\n\n\n"
        "class Child(Base):\n"
        "    def save(self):\n        return super().save() + 1\n\n"
        "    def close(self):\n        return super().close()\n"
    ),
    "web/observer.ts": (
        "export class Observer {\n  setOptions(o: number) {\n    return o\n  }\n}\n\n"
        "export class PagedObserver extends Observer {\n"
        "  setOptions(o: number) {\n    return super.setOptions(o + 1)\n  }\n}\n"
    ),
    "src/main/java/shop/Cart.java": (
        "package shop;\n\nclass Base {\n  int total() { return 0; }\n}\n\n"
        "class Cart extends Base {\n  int total() { return super.total() + 1; }\n}\n"
    ),
}


def test_super_calls_reach_the_base_class_method_not_the_override(tmp_path):
    """`super().save()` inside `Child.save` is `Base.save`; linking it to `Child.save` itself made
    the override its own caller.  A base outside the project (`object` here) defines nothing the
    project holds, so that call links nowhere."""
    root: Path = write_files(tmp_path / "super", SUPER_PROJECT)
    with Workspace.open(root, workers=1) as ws:
        ws.index()
        assert callees(ws, "app/child.py::Child.save") == ["app/base.py::Base.save"]
        assert callees(ws, "app/child.py::Child.close") == []
        assert callees(ws, "web/observer.ts::PagedObserver.setOptions") == ["web/observer.ts::Observer.setOptions"]
        assert callees(ws, "src/main/java/shop/Cart.java::Cart.total") == ["src/main/java/shop/Cart.java::Base.total"]


NAMESPACE_PROJECT = {
    "src/ns.ts": (
        "export namespace Geometry {\n  export function area(w: number, h: number): number {\n    return w * h\n  }\n}\n"
        "export function useArea() {\n  return Geometry.area(2, 3)\n}\n"
    ),
    "src/legacy.ts": (
        "namespace Geometry {\n  export function area(r: number): number {\n    return 3.14 * r * r\n  }\n}\n"
        "export function legacyArea() {\n  return Geometry.area(1)\n}\n"
    ),
    "src/app.ts": "import { Geometry } from './ns'\nexport function main() {\n  return Geometry.area(4, 5)\n}\n",
}


def test_a_call_on_a_namespace_reaches_its_member(tmp_path):
    """`Geometry.area()` is the `area` of the namespace `Geometry` in scope, like a class's static
    method: the file's own namespace, or the one imported, whichever other file defines one of
    that name too."""
    root: Path = write_files(tmp_path / "namespaces", NAMESPACE_PROJECT)
    with Workspace.open(root, workers=1) as ws:
        ws.index()
        assert callees(ws, "src/ns.ts::useArea") == ["src/ns.ts::Geometry.area"]
        assert callees(ws, "src/legacy.ts::legacyArea") == ["src/legacy.ts::Geometry.area"]
        assert callees(ws, "src/app.ts::main") == ["src/ns.ts::Geometry.area"]
