"""C, C++ and C# read as the compiler sees them after its preprocessor: a conditional that
splits a class header, annotation macros around a class or function, and operators, each of
which made a grammar lose whole classes (tests written from the patterns, on code of our own)."""

from __future__ import annotations

import pytest

from memstrata.indexer import grammar_repair
from memstrata.indexer.parse import parse_definitions, parse_source
from memstrata.indexer.scan import is_test_path

CSHARP = b"""\
namespace Demo
{
    public abstract partial class Reader
#if HAVE_ASYNC
        : IAsyncThing
#endif
    {
        public int Read() { return 1; }
    }

    internal enum Mode
    {
        Plain,
#if HAVE_OFFSET
        Offset,
#endif
        Last
    }

    public class Scanner
    {
        public int Scan() { return 2; }
#if DEBUG
        public void Dump() { }
#else
        public void Dump(int level) { }
#endif
        public int After() { return 3; }
        public static explicit operator int(Scanner s) { return 0; }
        public static Scanner operator +(Scanner a, Scanner b) { return a; }
    }
}
"""

CPP = b"""\
#include <string>
LIB_BEGIN_NAMESPACE

class LIB_API handle {
 public:
  handle() {}
  bool operator==(const handle& o) const { return true; }
  explicit operator bool() const { return ok_; }
  int operator()(int x) { return x; }
 private:
  bool ok_;
};

class LIB_VISIBLE("default") bad_thing : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

LIB_EXPORT_BEGIN
template <typename T> class view {
 public:
  int size() const { return 0; }
};

LIB_EXPORT template <typename Ctx> class store {
  int n;
};
LIB_EXPORT_END

void report(int code) {
  LIB_TRY {
    do_work(code);
  }
  LIB_CATCH(...) {}
  finish(code);
}

int after(int x) LIB_NOEXCEPT { return x + 1; }
LIB_END_NAMESPACE
"""


def _defs(path: str, language: str, source: bytes) -> dict[str, tuple[str, int, int]]:
    return {s.qualname: (s.kind, s.start_line, s.end_line) for s in parse_definitions(path, language, source)}


def test_a_conditional_inside_a_class_header_or_an_enum_keeps_the_class():
    defs = _defs("Reader.cs", "csharp", CSHARP)
    assert defs["Reader"] == ("class", 3, 9) and "Reader.Read" in defs
    assert not any(q.startswith("HAVE_") for q in defs)
    assert {"Mode.Plain", "Mode.Offset", "Mode.Last"} <= set(defs)
    assert defs["Scanner"] == ("class", 20, 31)
    # every branch is kept when the branches read side by side: both versions of Dump
    assert {"Scanner.Dump", "Scanner.Dump:2", "Scanner.After"} <= set(defs)
    assert parse_source("Reader.cs", "csharp", CSHARP).syntax_error is None


def test_two_versions_of_one_header_keep_the_first():
    source = b"""\
#ifdef WIDE
int measure(long value)
#else
int measure(int value)
#endif
{
    return 1;
}

int next_one(int v) { return v + 1; }
"""
    defs = _defs("m.c", "c", source)
    assert defs["measure"] == ("function", 2, 8)
    assert defs["next_one"] == ("function", 10, 10)


def test_annotation_macros_around_classes_and_functions():
    defs = _defs("lib.hpp", "cpp", CPP)
    assert defs["handle"] == ("class", 4, 12)
    assert defs["bad_thing"] == ("class", 14, 17)
    assert defs["view"][0] == "class" and "view.size" in defs
    assert defs["store"] == ("class", 25, 27)
    assert defs["report"] == ("function", 30, 36)  # the wrapped try block does not end it early
    assert defs["after"] == ("function", 38, 38)
    assert parse_source("lib.hpp", "cpp", CPP).syntax_error is None


def test_operators_are_definitions():
    cpp = _defs("lib.hpp", "cpp", CPP)
    assert {"handle.operator==", "handle.operator bool", "handle.operator()"} <= set(cpp)
    out_of_class = _defs("h.cpp", "cpp", b"bool handle::operator<(const handle& o) const { return false; }\n")
    assert "handle.operator<" in out_of_class
    cs = _defs("Reader.cs", "csharp", CSHARP)
    assert cs["Scanner.operator int"] == ("method", 29, 29)
    assert "Scanner.operator+" in cs


def test_destructors_in_their_class_and_csharp_indexers_are_definitions():
    cpp = _defs("buf.hpp", "cpp",
                b"class Buf {\n public:\n  Buf() {}\n  ~Buf() { release(); }\n  void release() {}\n};\n")
    assert cpp["Buf.~Buf"] == ("method", 4, 4)
    cs = _defs("Bag.cs", "csharp",
               b"public class Bag\n{\n    private int[] items;\n    public int this[int i]\n    {\n"
               b"        get { return items[i]; }\n    }\n    public string this[string k] => k;\n}\n")
    assert cs["Bag.this[]"] == ("method", 4, 7) and "Bag.this[]:2" in cs


def test_a_file_that_parses_cleanly_is_read_once(monkeypatch):
    def never(*_args):
        raise AssertionError("a clean parse was read again")

    monkeypatch.setattr(grammar_repair, "best_reading", never)
    source = b"#define LIMIT 4\nLIB_API int f(void);\nint g(void) { return LIMIT; }\n"
    defs = _defs("ok.c", "c", b"#define LIMIT 4\nint g(void) { return LIMIT; }\n")
    assert defs["LIMIT"][0] == "constant" and defs["g"] == ("function", 2, 2)
    with pytest.raises(AssertionError, match="read again"):
        _defs("macro.c", "c", source.replace(b"int g", b"LIB_API int g"))


@pytest.mark.parametrize("first_branch_only", [True, False])
def test_blanking_keeps_every_offset(first_branch_only):
    for source in (CSHARP, CPP, b"#if 0\nold();\n#else\nnew();\n#endif\r\nx();\n"):
        for repaired in (grammar_repair.blank_conditionals(source, first_branch_only=first_branch_only)[0],
                         grammar_repair.blank_annotation_macros(source)):
            assert len(repaired) == len(source)
            assert [i for i, b in enumerate(repaired) if b == 10] == [i for i, b in enumerate(source) if b == 10]


def test_an_if_zero_branch_is_dead_code():
    source = b"#if 0\nold();\n#else\nnew();\n#endif\n"
    kept, dropped = grammar_repair.blank_conditionals(source, first_branch_only=True)
    assert dropped == len(b"old();")
    assert b"old" not in kept and b"new();" in kept and b"#" not in kept


def test_a_macro_line_after_a_block_closed_with_a_comment_is_blanked():
    source = (b"}  // namespace detail\n\n/** Docs. */\nLIB_EXPORT\n"
              b"template <typename T> struct holder {\n  T value;\n};\n")
    repaired = grammar_repair.blank_annotation_macros(source)
    assert b"LIB_EXPORT" not in repaired and b"struct holder" in repaired


def test_an_enum_member_alone_on_its_line_is_no_macro():
    source = b"enum level {\n  LOW,\n  HIGH_LEVEL\n};\nLIB_MARKER\nint f(void);\n"
    repaired = grammar_repair.blank_annotation_macros(source)
    assert b"HIGH_LEVEL" in repaired and b"LIB_MARKER" not in repaired


def test_a_ruby_module_opened_again_names_its_members_under_its_own_name():
    source = b"""\
module Shop; end

module Shop
  class Cart
    def total
      1
    end
  end
end

module Shop
  class Cart
    def add(item)
      item
    end
  end
end
"""
    defs = _defs("shop.rb", "ruby", source)
    assert {"Shop.Cart", "Shop.Cart.total", "Shop.Cart.add"} <= set(defs)
    assert not any(q.startswith("Shop:") and "." in q for q in defs)


@pytest.mark.parametrize("path", [
    "Src/Shop.Tests/CartTests.cs", "src/Shop.UnitTests/Fakes/FakeClock.cs", "Tests/Fixtures/FooCommand.php",
    "Shop.IntegrationTests/Setup.cs", "Test/Helper.rb",
])
def test_dotnet_test_projects_and_capitalised_test_folders_are_test_code(path):
    assert is_test_path(path)


@pytest.mark.parametrize("path", ["Src/Shop/Cart.cs", "src/Contest/Rules.cs", "Latest/Notes.php"])
def test_folders_that_only_look_alike_are_not(path):
    assert not is_test_path(path)


# A callable type's and an interface's overloads one per line without `;`, the second generic:
# the grammar reads `Thunk <Returned> (...)` as a comparison and loses what follows.  The doc
# comment before a signature and type parameters one per line put the error lines below it.
TS_OVERLOADS = b"""\
export interface Creator {
  (name: string): Thunk
  <Returned>(
    name: string,
  ): Thunk<Returned>
  withTypes(): Creator
}

export type Bound = {
  (): State
  /**
   * With a selector.
   */
  <
    U,
  >(selector: (s: State) => U): U
}

export interface Options {
  retries: number
}

export function createThing(o: Options): Creator {
  const small = o.retries
    < limit
  return make(o, small)
}

export const create = (name: string) => make(name)
"""


@pytest.mark.parametrize("language", ["typescript", "tsx"])
def test_typescript_generic_overloads_one_per_line_are_separate_members(language):
    result = parse_source("creator.ts", language, TS_OVERLOADS)
    assert result.syntax_error is None
    assert {(s.qualname, s.start_line, s.end_line) for s in result.symbols} >= {
        ("Creator", 1, 7), ("Creator.withTypes", 6, 6), ("Bound", 9, 17), ("Options", 19, 21),
        ("createThing", 23, 27), ("create", 29, 29)}


def test_the_separating_semicolon_goes_only_where_a_member_ended():
    source = b"type T = {\n  (): A\n  <U>(u: U): U\n}\nconst x = a <\n  <B>c\nconst y = f(\n  <C>d)\n"
    repaired = grammar_repair.separate_generic_signatures(source, None)
    assert len(repaired) == len(source) and repaired.count(b"\n") == source.count(b"\n")
    assert repaired.split(b"\n")[2] == b"; <U>(u: U): U"
    assert repaired.split(b"\n")[5:8] == source.split(b"\n")[5:8]  # after `<` and `(`: a continuation
