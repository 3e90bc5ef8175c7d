"""parse_definitions (the outline's parse: definition patterns only) finds exactly the symbols
parse_source finds, on every language's fixture and on code that does not parse."""

from pathlib import Path

import pytest

from memstrata.indexer.languages import get_definition_passes, get_query_passes
from memstrata.indexer.parse import parse_definitions, parse_source
from memstrata.indexer.scan import scan_project

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _files():
    for project in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for c in scan_project(project).files:
            yield pytest.param(project / c.path, c.language, id=f"{project.name}/{c.path}")


@pytest.mark.parametrize("path,language", list(_files()))
def test_same_symbols_as_the_full_parse(path, language):
    data = path.read_bytes()
    assert parse_definitions(str(path), language, data) == parse_source(str(path), language, data).symbols


def test_the_fixtures_define_things_in_every_language():
    found = {}
    for param in _files():
        path, language = param.values
        found[language] = found.get(language, 0) + len(parse_definitions(str(path), language, path.read_bytes()))
    assert len(found) >= 10 and all(found.values()), found


@pytest.mark.parametrize("language", ["python", "javascript", "typescript", "go", "rust", "java", "cpp", "ruby", "php"])
def test_no_reference_or_import_pattern_runs(language):
    patterns = [t for qp in get_definition_passes(language) for t in qp.patterns]
    everything = [t for qp in get_query_passes(language) for t in qp.patterns]
    assert patterns and len(patterns) < len(everything)
    for text in patterns:
        code = "\n".join(line.split(";", 1)[0] for line in text.splitlines())
        assert "@reference." not in code and "@import" not in code


def test_broken_code_gives_the_same_symbols():
    src = b"def ok(a):\n    return a\n\nclass Half(:\n    def m(self):\n        pass\n\ndef tail(:\n"
    assert parse_definitions("x.py", "python", src) == parse_source("x.py", "python", src).symbols
    assert [s.name for s in parse_definitions("x.py", "python", src)][:1] == ["ok"]


def test_a_go_type_declared_alone_keeps_its_keyword_in_its_signature():
    src = b"package p\n\ntype Level int8\n\ntype Alias = int\n\ntype I interface {\n\tM()\n}\n\n" \
          b"type (\n\tA int\n\tB struct {\n\t\tx int\n\t}\n)\n"
    sigs = {s.qualname: s.signature for s in parse_source("p.go", "go", src).symbols}
    assert sigs["Level"] == "type Level int8" and sigs["Alias"] == "type Alias = int"
    assert sigs["I"] == "type I interface {"
    # A group's members are written without the keyword: their signature is their own line.
    assert sigs["A"] == "A int" and sigs["B"] == "B struct {"


def test_java_constants_and_what_their_bodies_hold():
    src = b"""class Adapters {
    public static final Adapter<Boolean> BOOLEAN = new Adapter<Boolean>() {
        @Override public Boolean read(Reader in) { return null; }
    };
    private static final int A = 1, B = 2;
    private int count = 3;
    @Note("final") static int plain = 4;
}
enum Policy { UPPER { @Override String tr(String s) { return s; } }, LOWER; abstract String tr(String s); }
interface Limits { int MAX = 4; }
@interface Named { String value() default ""; }
"""
    got = {(s.qualname, s.kind) for s in parse_source("Adapters.java", "java", src).symbols}
    assert {("Adapters.BOOLEAN", "constant"), ("Adapters.BOOLEAN.read", "method"), ("Adapters.A", "constant"),
            ("Adapters.B", "constant"), ("Policy.UPPER", "constant"), ("Policy.UPPER.tr", "method"),
            ("Policy.LOWER", "constant"), ("Policy.tr", "method"), ("Limits.MAX", "constant"),
            ("Named.value", "method")} <= got
    assert not {q for q, _k in got if q.endswith((".count", ".plain"))}  # fields that are no constants


def test_csharp_properties_and_constants_are_definitions():
    src = b"""namespace N {
public class Options {
    public const int Max = 3;
    private static readonly string Fallback = "x";
    public string SetName { get { return name; } set { name = value; } }
    public int Age => 3;
}
public enum Color { Red, Green = 2 }
}
"""
    got = {(s.qualname, s.kind) for s in parse_source("Options.cs", "csharp", src).symbols}
    assert {("Options.Max", "constant"), ("Options.SetName", "method"), ("Options.Age", "method"),
            ("Color.Red", "constant"), ("Color.Green", "constant")} <= got
    assert ("Options.Fallback", "constant") not in got  # readonly, not const: a field


def test_java_annotations_and_class_literals_use_their_types():
    src = b'class A { @SerializedName("id") @Expose String id; Object t() { return adapter(Foo.class); } }'
    refs = {(r.name, r.kind) for r in parse_source("A.java", "java", src).refs}
    assert {("SerializedName", "type"), ("Expose", "type"), ("Foo", "type")} <= refs


def test_ruby_methods_made_by_attr_and_alias_calls():
    src = b"""class Base
  attr_accessor :options, :parent_options
  attr_reader :size
  def inject_into_file(dest); end
  alias_method :insert_into_file, :inject_into_file
  alias prepend_to_file inject_into_file
end
"""
    got = {s.qualname for s in parse_source("base.rb", "ruby", src).symbols if s.kind == "method"}
    assert got == {"Base.options", "Base.parent_options", "Base.size", "Base.inject_into_file",
                   "Base.insert_into_file", "Base.prepend_to_file"}
