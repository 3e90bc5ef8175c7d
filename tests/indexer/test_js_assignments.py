"""JavaScript definitions by assignment (CommonJS style) become symbols with
qualified names, and references resolve through require() to them."""

from __future__ import annotations

import pytest

from memstrata.compressor import context_query
from memstrata.indexer.parse import parse_source
from memstrata.indexer.workspace import Workspace

from ..conftest import FIXTURES

PROJECT = FIXTURES / "commonjs_project"

SYMBOLS = {
    "lib/response.js": {("res.send", "method"), ("res.json", "method"), ("res.sendFile", "method"),
                        ("sendfile", "function")},
    "lib/application.js": {("app.init", "method"), ("app.use", "method"), ("app.handle", "method")},
    "lib/layer.js": {("Layer", "function"), ("Layer.match", "method"), ("Layer.run", "method")},
    "lib/router.js": {("Router", "function"), ("Router.route", "method"), ("Router.dispatch", "method")},
    "lib/utils.js": {("flatten", "function"), ("isAbsolute", "function"), ("merge", "function")},
    "lib/query.js": {("query", "function")},
    "lib/compile-etag.js": {("compile_etag", "function")},
    "lib/view.js": {("View", "class"), ("View.constructor", "method"), ("View.render", "method")},
    "lib/handlers.js": {("onRequest", "method"), ("onError", "method"), ("onClose", "method")},
    "lib/index.js": {("createApp", "function")},
}


@pytest.mark.parametrize("rel", sorted(SYMBOLS))
def test_assignment_definitions_are_symbols(rel):
    result = parse_source(rel, "javascript", (PROJECT / rel).read_bytes())
    assert result.syntax_error is None
    assert {(s.qualname, s.kind) for s in result.symbols} == SYMBOLS[rel]


def test_every_fixture_file_is_listed():
    assert {p.relative_to(PROJECT).as_posix() for p in PROJECT.rglob("*.js")} == set(SYMBOLS)


def test_statement_span_signature_and_leading_comment():
    result = parse_source("lib/response.js", "javascript", (PROJECT / "lib/response.js").read_bytes())
    send = next(s for s in result.symbols if s.qualname == "res.send")
    assert send.signature == "res.send = function send(body) {"
    assert send.docstring == "Send a response body, setting Content-Length."
    assert (send.start_line, send.end_line) == (11, 15)


def test_typescript_gets_the_same_forms():
    source = b"exports.f = (a: number) => a;\nFoo.prototype.g = function (): void {};\nconst o = { h: () => 1 };\n"
    result = parse_source("x.ts", "typescript", source)
    assert {(s.qualname, s.kind) for s in result.symbols} >= {("f", "function"), ("Foo.g", "method"),
                                                            ("o.h", "method")}


@pytest.fixture(scope="module")
def cjs_ws(tmp_path_factory):
    import shutil

    root = tmp_path_factory.mktemp("cjs") / "commonjs_project"
    shutil.copytree(PROJECT, root)
    with Workspace.open(root) as ws:
        ws.index()
        yield ws


def _callees(ws, node):
    return set(ws.graph.callees(node))


def test_require_resolves_members_defaults_and_exported_objects(cjs_ws):
    assert _callees(cjs_ws, "lib/index.js::createApp") >= {
        "lib/application.js::app.init",  # `app = require('./application'); app.init()`
        "lib/application.js::app.use",
        "lib/query.js::query",  # module.exports = function query
        "lib/compile-etag.js::compile_etag",  # anonymous module.exports, called by its local name
        "lib/utils.js::flatten",  # exports.flatten, via the module alias
        "lib/utils.js::merge",  # destructured require
        "lib/view.js::View",  # module.exports = class View
        "lib/view.js::View.render",
        "lib/router.js::Router",
    }
    # `res.send(...)` on a parameter named like the exported object.
    assert "lib/response.js::res.send" in _callees(cjs_ws, "lib/handlers.js::onRequest")
    # `this.send` inside `res.json = function ...`, and prototype members.
    assert "lib/response.js::res.send" in _callees(cjs_ws, "lib/response.js::res.json")
    assert {"lib/layer.js::Layer.match", "lib/layer.js::Layer.run"} <= _callees(cjs_ws, "lib/router.js::Router.dispatch")


def test_query_naming_an_assigned_method_finds_it(cjs_ws):
    r = context_query(cjs_ws, "res.send", max_tokens=1000)
    assert r.symbols[0] == "lib/response.js::res.send"
    assert "res.send = function send(body) {" in r.context
