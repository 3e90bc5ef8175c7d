"""A call on a variable reaches the method of the type the variable is declared with: a
parameter, a local, a field, or a field set from the constructor's parameter of the same name
(`self.client = client`).  Where nothing says the type, nothing is guessed."""

from __future__ import annotations

import pytest

from memstrata.indexer.parse import parse_source

from ..conftest import indexed_workspace

LANGUAGE = {"ts": "typescript", "js": "javascript"}

PROJECTS = {
    "java": ({
        "src/io/Writer.java": "package io;\n\npublic class Writer {\n    public void value(int v) { }\n}\n",
        "src/io/Other.java": "package io;\n\npublic class Other {\n    public void value(int v) { }\n}\n",
        "src/app/Main.java": """package app;

import io.Writer;

public class Main {
    private Writer out;

    void param(Writer w) { w.value(1); }
    void local() { Writer v = make(); v.value(2); }
    void field() { this.out.value(3); out.value(4); }
    void unknown(Object o) { o.value(5); }
}
""",
    }, "src/app/Main.java::Main", "src/io/Writer.java::Writer.value"),
    "typescript": ({
        "src/writer.ts": "export class Writer {\n  value(v: number) {}\n}\nexport class Other {\n  value(v: number) {}\n}\n",
        "src/main.ts": """import { Writer } from "./writer";

export class Main {
  out: Writer;
  constructor(private readonly db: Writer) {}
  param(w: Writer) { w.value(1); }
  local() { const v: Writer = make(); v.value(2); }
  field() { this.out.value(3); this.db.value(4); }
  unknown(o: any) { o.value(5); }
}
""",
    }, "src/main.ts::Main", "src/writer.ts::Writer.value"),
    "python": ({
        "pkg/__init__.py": "",
        "pkg/writer.py": "class Writer:\n    def value(self, v):\n        pass\n\n\nclass Other:\n    def value(self, v):\n        pass\n",
        "pkg/main.py": """from pkg.writer import Writer


class Main:
    def __init__(self, out: Writer):
        self.out = out

    def param(self, w: Writer):
        w.value(1)

    def local(self):
        v: Writer = make()
        v.value(2)

    def field(self):
        self.out.value(3)

    def unknown(self, o):
        o.value(5)
""",
    }, "pkg/main.py::Main", "pkg/writer.py::Writer.value"),
    "go": ({
        "go.mod": "module example.com/m\n",
        "w/writer.go": "package w\n\ntype Writer struct{}\n\nfunc (x *Writer) Value(v int) {}\n\ntype Other struct{}\n\nfunc (x *Other) Value(v int) {}\n",
        "w/main.go": """package w

type Main struct{}

func (m *Main) Param(wr *Writer) { wr.Value(1) }

func (m *Main) Local() {
	var v Writer
	v.Value(2)
}

func (m *Main) Unknown(o interface{}) { o.Value(5) }
""",
    }, "w/main.go::Main", "w/writer.go::Writer.Value"),
}


@pytest.mark.parametrize("language", sorted(PROJECTS))
def test_a_call_on_a_declared_variable_reaches_its_types_method(tmp_path, language):
    files, main, value = PROJECTS[language]
    ws = indexed_workspace(tmp_path / language, files)
    try:
        callers = {n.node for n in ws.graph.neighbors(value, ("calls",), "in")}
        expected = {f"{main}.{m}" for m in ("param", "local", "field")}
        if language == "go":
            expected = {f"{main}.{m}" for m in ("Param", "Local")}
        assert callers == expected
        other = value.replace("Writer", "Other").replace("writer.", "writer.")
        assert not list(ws.graph.neighbors(other, ("calls",), "in"))  # `o.value()`: no type, no guess
    finally:
        ws.close()


def test_a_local_made_with_new_has_the_constructed_type(tmp_path):
    # `const s = new Store()` says the type as plainly as `const s: Store = ...`; any other
    # initialiser (a call's result) says nothing.
    ws = indexed_workspace(tmp_path, {
        "src/store.ts": "export class Store {\n  get(key: string): unknown {\n    return key\n  }\n}\n"
                        "export class Cache {\n  get(k: string): string {\n    return k\n  }\n}\n",
        "src/main.ts": "import { Store } from './store'\n\nexport function loadLocal(key: string) {\n"
                       "  const s = new Store()\n  const c = make()\n  return [s.get(key), c.get(key)]\n}\n",
        "src/box.js": "class Box {\n  open() {}\n}\nclass Crate {\n  open() {}\n}\n"
                      "function unpack() {\n  let b = new Box()\n  b.open()\n}\n",
    })
    try:
        assert set(ws.graph.callees("src/main.ts::loadLocal")) == {"src/store.ts::Store", "src/store.ts::Store.get"}
        assert "src/box.js::Box.open" in ws.graph.callees("src/box.js::unpack")
        assert "src/box.js::Crate.open" not in ws.graph.callees("src/box.js::unpack")
    finally:
        ws.close()


@pytest.mark.parametrize("ext", ["ts", "js"])
def test_a_local_made_with_new_through_a_namespace_has_the_constructed_type(tmp_path, ext):
    # `new ns.Klass()` with `import * as ns from './shapes'` names the class as plainly as
    # `new Klass()`; `new Intl.NumberFormat()` names a class outside the project, so a call on
    # the local is a method call on an object, never a call of the project's function `format`.
    ws = indexed_workspace(tmp_path, {
        f"src/shapes.{ext}": "export class Klass {\n  method() {\n    return 1\n  }\n}\n"
                             "export class Other {\n  method() {\n    return 2\n  }\n}\n",
        f"src/format.{ext}": "export function format(n) {\n  return String(n)\n}\n",
        f"src/main.{ext}": "import * as ns from './shapes'\nimport { format } from './format'\n\n"
                           "export function run() {\n  const v = new ns.Klass()\n  return v.method()\n}\n\n"
                           "export function money(n) {\n  const f = new Intl.NumberFormat()\n"
                           "  return f.format(n) + format(n)\n}\n",
    })
    try:
        main = f"src/main.{ext}"
        assert set(ws.graph.callees(f"{main}::run")) == {f"src/shapes.{ext}::Klass", f"src/shapes.{ext}::Klass.method"}
        source = (tmp_path / main).read_bytes()
        binds = {(r.name, r.receiver) for r in parse_source(main, LANGUAGE[ext], source).refs if r.kind == "bind"}
        assert binds == {("ns.Klass", "v"), ("Intl.NumberFormat", "f")}
        # the one call of `format` is the bare one; `f.format(n)` is Intl's
        assert ws.graph.callees(f"{main}::money") == [f"src/format.{ext}::format"]
    finally:
        ws.close()


def test_a_type_annotation_through_a_namespace_import_binds_the_variable(tmp_path):
    # `const v: ns.Klass = make()` (and a parameter, an optional one, a field, `ns.Klass<T>`)
    # says the type as plainly as `new ns.Klass()`: a call on the variable is the method of the
    # class `ns` names, not of a namesake class of the same module.
    ws = indexed_workspace(tmp_path, {
        "src/shapes.ts": "export class Klass {\n  method(): number {\n    return 1\n  }\n}\n"
                         "export class Other {\n  method(): number {\n    return 2\n  }\n}\n",
        "src/main.ts": "import * as ns from './shapes'\n\n"
                       "export function run(): number {\n  const v: ns.Klass = make()\n  return v.method()\n}\n\n"
                       "export function two(k: ns.Klass<string>, o?: ns.Other): number {\n"
                       "  return k.method() + (o ? o.method() : 0)\n}\n\n"
                       "export class Holder {\n  field: ns.Other\n  go(): number {\n    return this.field.method()\n  }\n}\n",
    })
    try:
        assert "src/shapes.ts::Klass.method" in ws.graph.callees("src/main.ts::run")
        assert "src/shapes.ts::Other.method" not in ws.graph.callees("src/main.ts::run")
        two = set(ws.graph.callees("src/main.ts::two"))
        assert two == {"src/shapes.ts::Klass.method", "src/shapes.ts::Other.method"}
        assert ws.graph.callees("src/main.ts::Holder.go") == ["src/shapes.ts::Other.method"]
        # `ns.Klass<string>` is a use of the type, as `ns.Klass` is
        uses = {n.node for n in ws.graph.neighbors("src/main.ts::two", ("references",), "out")}
        assert uses == {"src/shapes.ts::Klass", "src/shapes.ts::Other"}
    finally:
        ws.close()


@pytest.mark.parametrize("ext", ["ts", "js"])
def test_a_variable_typed_through_its_own_name_resolves_no_class_and_does_not_loop(tmp_path, ext):
    # `const AST: AST.Program = ...` (a variable named like the namespace it is typed by), a
    # parameter `ts: ts.Node`, `var foo = new foo.Klass()`, and a cycle of two such names: the
    # type is looked up through the variable itself, which names no class of its own (the type's
    # name alone may still, when the project defines it once); the index is built.
    typed = ("const AST: AST.Program = make()\nexport function walk(ts: ts.Node) {\n  return ts.kind() + AST.body()\n}\n"
             "export function pair(a: b.Klass, b: a.Klass) {\n  return a.method() + b.method()\n}\n")
    files = {
        f"src/shapes.{ext}": "export class Klass {\n  method() {\n    return 1\n  }\n}\n"
                             "export class Other {\n  method() {\n    return 2\n  }\n}\n",
        f"src/main.{ext}": (typed if ext == "ts" else "")
        + "export function own() {\n  var foo = new foo.Klass()\n  return foo.method()\n}\n",
    }
    ws = indexed_workspace(tmp_path, files)
    try:
        assert set(ws.graph.callees(f"src/main.{ext}::own")) <= {f"src/shapes.{ext}::Klass", f"src/shapes.{ext}::Klass.method"}
        if ext == "ts":
            assert ws.graph.callees("src/main.ts::walk") == []
            assert set(ws.graph.callees("src/main.ts::pair")) <= {"src/shapes.ts::Klass.method"}
    finally:
        ws.close()
