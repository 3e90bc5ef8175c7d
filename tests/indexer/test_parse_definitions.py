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


def _spans(path, language, src):
    return [(s.qualname, s.kind, s.start_line, s.end_line) for s in parse_source(path, language, src).symbols]


def test_a_c_macro_spans_its_own_line_only():
    src = b"#define CODE_OK 0\n#define CODE_RETRY 1\n#define CODE_FAIL 2\n"
    result = parse_source("codes.h", "c", src)
    assert [(s.name, s.start_line, s.end_line) for s in result.symbols] == [
        ("CODE_OK", 1, 1), ("CODE_RETRY", 2, 2), ("CODE_FAIL", 3, 3)]
    retry = result.symbols[1]
    assert src[retry.start_byte:retry.end_byte] == b"#define CODE_RETRY 1"


def test_c_macros_in_every_branch_and_function_like_ones():
    src = (b"#ifndef P_H\n#define P_H\n#ifdef _WIN32\n#define SEP '\\\\'\n#else\n#define SEP '/'\n#endif\n"
           b"#define P_MAX(a, b) ((a) > (b) ? (a) : (b))\ntypedef int p_fd;\n#endif\n")
    assert _spans("p.h", "c", src) == [("SEP", "constant", 4, 4), ("SEP:2", "constant", 6, 6),
                                       ("P_MAX", "function", 8, 8), ("p_fd", "type", 9, 9)]


def test_the_extern_c_guard_of_a_c_header_parses():
    src = (b'#ifndef LIB_H\n#define LIB_H\n#ifdef __cplusplus\nextern "C" {\n#endif\n\n#define LIB_FLAG 1\n'
           b"typedef struct lib_ctx {\n    int flags;\n} lib_ctx;\n"
           b"static inline int lib_flags(const lib_ctx *c) {\n    return c->flags;\n}\n\n"
           b"#if defined(__cplusplus)\n}  /* extern C */\n#endif\n#endif\n")
    for language in ("c", "cpp"):
        result = parse_source("lib.h", language, src)
        assert result.syntax_error is None, language
        assert [(s.name, s.start_line, s.end_line) for s in result.symbols] == [
            ("LIB_FLAG", 7, 7), ("lib_ctx", 8, 10), ("lib_flags", 11, 13)], language


def test_a_header_written_in_cpp_is_parsed_as_cpp():
    from memstrata.indexer.languages import language_of

    cpp = b"#pragma once\nnamespace ui {\ntemplate <typename T>\nclass Widget {\npublic:\n    T get() const;\n};\n}\n"
    assert language_of("include/ui/widget.h", "c", cpp) == "cpp"
    assert language_of("include/ui/widget.h", "c", b"class Plain : public Base\n{\n};\n") == "cpp"
    plain_c = b"#ifndef W_H\n#define W_H\nstruct widget { int class_id; };\nint widget_get(struct widget *w);\n#endif\n"
    assert language_of("widget.h", "c", plain_c) == "c"
    assert language_of("widget.c", "c", cpp) == "c"  # a .c file is C whatever it holds


def test_php_class_constants_enum_cases_and_class_scoped_uses():
    src = b"""<?php
namespace Acme;
class User {
    const TABLE = 'users';
    public static $count = 0;
}
enum Status { case Active; case Banned; }
function f() { return [User::class, User::TABLE, User::$count, \\Acme\\Other::KEY, self::X, Status::Active]; }
"""
    result = parse_source("u.php", "php", src)
    assert {(s.qualname, s.kind) for s in result.symbols} >= {
        ("User.TABLE", "constant"), ("Status.Active", "constant"), ("Status.Banned", "constant")}
    types = sorted((r.name, r.line) for r in result.refs if r.kind == "type")
    assert types == [("Other", 8), ("Status", 8), ("User", 8)]
    assert next(r.count for r in result.refs if r.name == "User" and r.kind == "type") == 3


def test_a_namespaced_cpp_template_type_is_a_use_of_its_class():
    src = b"namespace ui { template <typename T> class Widget {}; }\nint main() { ui::Widget<int> w(3); return 0; }\n"
    assert ("Widget", "type", 2) in {(r.name, r.kind, r.line) for r in parse_source("main.cpp", "cpp", src).refs}


def test_a_c_macro_written_inside_a_struct_or_function_is_a_top_level_name():
    src = (b"struct conn {\n    unsigned flags;\n#define CONN_F_OPEN 0x1\n"
           b"#define conn_is_open(c) (((c)->flags & CONN_F_OPEN) != 0)\n};\n"
           b"int sum(int a) {\n#define AT(i) (a + (i))\n    return AT(1);\n}\n")
    assert sorted(_spans("flags.c", "c", src)) == [
        ("AT", "function", 7, 7), ("CONN_F_OPEN", "constant", 3, 3), ("conn", "struct", 1, 5),
        ("conn_is_open", "function", 4, 4), ("sum", "function", 6, 9)]


def test_php_constants_of_an_enum():
    src = b"<?php\nenum Status: string { case On = 'on'; const DEFAULT = self::On; }\n"
    assert {("Status.On", "constant"), ("Status.DEFAULT", "constant")} <= {
        (s.qualname, s.kind) for s in parse_source("s.php", "php", src).symbols}


def test_a_macro_continued_on_the_next_line_has_no_backslash_in_its_signature():
    src = b"#define SWAP(a, b) \\\n    do { int t = (a); (a) = (b); (b) = t; } while (0)\n"
    [macro] = parse_source("m.h", "c", src).symbols
    assert (macro.name, macro.signature, macro.start_line, macro.end_line) == ("SWAP", "#define SWAP(a, b)", 1, 2)


@pytest.mark.parametrize("path,language,src,expected", [
    ("a.py", "python", b"def load(path):  # cached below\n    # First, the file's own settings\n    return path\n",
     "def load(path):"),
    ("a.py", "python", b"class Store(Base):\n    # rows by key\n    rows = {}\n", "class Store(Base):"),
    ("a.js", "javascript", b"function load(path) /* cached */ {\n  return path;\n}\n", "function load(path)"),
    ("a.rs", "rust", b"fn load(path: &str) -> u8 // cached\n{\n    0\n}\n", "fn load(path: &str) -> u8"),
])
def test_a_signature_ends_before_the_comments_ahead_of_the_body(path, language, src, expected):
    # The grammar hangs these comments on the definition before its body; joined into the
    # one-line signature they read as code (`def load(path): # cached below # First, ...`).
    [definition] = parse_source(path, language, src).symbols
    assert definition.signature == expected


def test_a_comment_inside_the_parameters_stays_in_the_signature():
    src = b"def load(\n    path,  # where from\n    strict=False,\n):\n    return path\n"
    [definition] = parse_source("a.py", "python", src).symbols
    assert definition.signature == "def load( path, # where from strict=False, ):"
