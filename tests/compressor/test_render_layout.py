"""Slice layout: definitions set apart by blank lines, nested definitions
inside their parent, overload stubs folded into the implementation."""

from __future__ import annotations

import textwrap

import pytest

from memstrata.compressor import context_query
from memstrata.indexer.parse import parse_source
from memstrata.indexer.workspace import Workspace

SOURCE = '''
from typing import overload


class Store:
    """Rows kept in memory."""

    def __init__(self):
        self.rows = {}

    def put(self, key, row):
        """Keep a row."""
        self.rows[key] = row

    def get(self, key):
        """Fetch a row."""
        return self.rows[key]

    @overload
    def fetch(self, key: int) -> dict: ...
    @overload
    def fetch(self, key: str) -> dict: ...
    def fetch(self, key):
        """Fetch by id or name."""
        return self.get(key)


def load(path):
    """Read rows from a file."""
    def parse(line):
        return line.split(",")
    return [parse(line) for line in open(path)]
'''


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("layout") / "proj"
    root.mkdir()
    (root / "store.py").write_text(textwrap.dedent(SOURCE).lstrip("\n"))
    with Workspace.open(root) as w:
        w.index()
        yield w


def test_overload_stubs_fold_into_the_implementation():
    result = parse_source("store.py", "python", textwrap.dedent(SOURCE).lstrip("\n").encode())
    fetch = [s for s in result.symbols if s.qualname == "Store.fetch"]
    assert len(fetch) == 1
    assert fetch[0].signature == "def fetch(self, key):"


def test_overload_stubs_with_a_trailing_comment_fold_too():
    source = textwrap.dedent("""
        from typing import overload

        class Expr:
            @overload  # type: ignore
            def subs(self, a: int) -> int: ...
            @overload
            def subs(self, a: str) -> str: ...

            def subs(self, a):
                return a
        """).lstrip("\n").encode()
    subs = [s for s in parse_source("expr.py", "python", source).symbols if s.qualname == "Expr.subs"]
    assert [(s.start_line, s.signature) for s in subs] == [(9, "def subs(self, a):")]


def test_a_bare_annotation_gives_way_to_the_definition_that_follows():
    source = textwrap.dedent("""
        from typing import Any, Callable

        XFAIL: Callable[[Any], Any]
        LIMIT: int
        RATE: float = 0.5

        if LIMIT:
            def XFAIL(func):
                return func
        """).lstrip("\n").encode()
    symbols = {s.qualname: (s.kind, s.start_line) for s in parse_source("t.py", "python", source).symbols}
    assert symbols["XFAIL"] == ("function", 8)
    assert symbols["LIMIT"] == ("constant", 4)  # declared only: still the one place it is named
    assert symbols["RATE"] == ("constant", 5)


def test_definitions_are_set_apart_by_blank_lines(ws):
    r = context_query(ws, "`Store.put` `Store.get` `Store.fetch`", max_tokens=2000)
    text = r.context
    assert "        self.rows[key] = row\n\n    def get(self, key):" in text
    assert "        return self.rows[key]\n\n" in text
    # The stubs are not shown as definitions of their own.
    assert "@overload" not in text.split("def fetch(self, key):")[1]


def test_nested_definitions_sit_inside_their_parent(ws):
    r = context_query(ws, "`parse` inside load", max_tokens=2000)
    text = r.context
    assert "def load(path):" in text
    assert text.index("def load(path):") < text.index("    def parse(line):")


def test_a_signature_one_argument_a_line_is_shown_without_its_body():
    from memstrata.compressor.render import signature_end

    lines = ["def attrib(", "    default=None,", "    validator=None,", "):", '    """Doc."""', "    return 1"]
    sig = "def attrib( default=None, validator=None, ):"
    assert signature_end(lines, 1, len(lines), sig) == 4
    lines = ["@decorator", "def f(", "    a,", "):", "    pass"]
    assert signature_end(lines, 1, len(lines), "def f( a, ):") == 4


RUST_SOURCE = '''
use std::fmt;

pub struct Ledger {
    rows: Vec<u64>,
}

impl<T> From<T> for Ledger
where
    T: IntoIterator<Item = u64>,
{
    fn from(rows: T) -> Self {
        Ledger { rows: rows.into_iter().collect() }
    }
}

impl Ledger {
    /// Entries kept so far.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn settle(&mut self) -> u64 {
        let total = self.rows.iter().sum();
        self.rows.clear();
        total
    }
}

impl fmt::Display for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rows", self.rows.len())
    }
}
'''

GO_SOURCE = '''
package ledger

// Kinds of row, in the order they are settled.
const (
	// Debit takes from the balance.
	Debit Kind = iota
	// Credit adds to it.
	Credit
	// Void changes nothing.
	Void
)

type Ledger struct {
\trows []uint64
}

// Settle sums the rows and clears them.
func (l *Ledger) Settle() uint64 {
\tvar total uint64
\tfor _, r := range l.rows {
\t\ttotal += r
\t}
\tl.rows = nil
\treturn total
}
'''


def _padded(source: str, filler: str) -> str:
    """The source with forty unrelated functions after it: large enough to be shown in part."""
    return source.lstrip("\n") + "".join(filler.format(k=k) for k in range(40))


@pytest.fixture(scope="module")
def typed_ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("typed") / "proj"
    root.mkdir()
    (root / "ledger.rs").write_text(_padded(RUST_SOURCE, "\npub fn spare_{k}(x: u64) -> u64 {{\n    x * {k} + 1\n}}\n"))
    (root / "ledger.go").write_text(_padded(GO_SOURCE, "\nfunc Spare{k}(x uint64) uint64 {{\n\treturn x*{k} + 1\n}}\n"))
    with Workspace.open(root) as w:
        w.index()
        yield w


def test_a_rust_method_is_framed_by_its_impl_header_not_its_struct(typed_ws):
    text = context_query(typed_ws, "`settle` and `fmt`", max_tokens=300).context
    section = text.split("// ledger.rs\n", 1)[1].split("\n\n// ledger.", 1)[0]
    assert "impl Ledger {\n" in section and section.index("impl Ledger {") < section.index("pub fn settle(")
    assert "impl fmt::Display for Ledger {\n    fn fmt(" in section
    assert section.count("impl Ledger {") == 1  # one header for the methods of one block
    # The struct holds no method: it frames none (shown, it is shown with its fields).
    assert "pub struct Ledger {\n//" not in section and "pub struct Ledger {\n\n" not in section


def test_an_impl_header_is_its_first_line_its_where_clause_left_to_the_marker(typed_ws):
    text = context_query(typed_ws, "`from`", max_tokens=300).context
    section = text.split("// ledger.rs\n", 1)[1].split("\n\n// ledger.", 1)[0]
    assert "impl<T> From<T> for Ledger\n    // ... lines 8-10 omitted\n    fn from(rows: T) -> Self {" in section


def test_an_impl_header_is_found_above_its_where_clause():
    from memstrata.compressor.render import _impl_header

    lines = RUST_SOURCE.lstrip("\n").split("\n")
    start = next(i for i, ln in enumerate(lines, 1) if "fn from(" in ln)
    first, last = _impl_header(lines, start)
    assert lines[first - 1] == "impl<T> From<T> for Ledger" and lines[last - 1] == "{"
    top = next(i for i, ln in enumerate(lines, 1) if ln.startswith("pub struct"))
    assert _impl_header(lines, top) is None and _impl_header(lines, top + 1) is None  # a field is in no impl


def test_a_go_method_goes_without_its_struct_header(typed_ws):
    text = context_query(typed_ws, "`settle` and `fmt`", max_tokens=300).context
    section = text.split("// ledger.go\n", 1)[1].split("\n\n// ledger.", 1)[0]
    assert "func (l *Ledger) Settle() uint64 {" in section
    assert "type Ledger struct {\n//" not in section and "type Ledger struct {\n\n" not in section


def test_a_function_nested_in_a_method_is_framed_by_the_impl_of_that_method():
    from memstrata.compressor.render import _impl_header

    lines = ["impl Ledger {", "    pub fn audit(&self) -> bool {", "        fn check(x: u64) -> bool {",
             "            x > 0", "        }", "        self.rows.iter().all(|r| check(*r))", "    }", "}"]
    assert _impl_header(lines, 2) == (1, 1)  # the method
    assert _impl_header(lines, 3) is None  # the nested fn's block is the method's, not an impl


def _rendered(root, path: str, shown: list[tuple[str, bool]]) -> str:
    """``path``'s section of a slice showing the given definitions (qualname, as a signature?),
    in that order of rank."""
    from memstrata.compressor.render import SIG, render, unit_for
    from memstrata.compressor.slice import _Docs

    with Workspace.open(root) as w:
        w.index()
        graph = w.graph
        docs = _Docs(w, graph)
        docs.load([path])
        units = []
        for rank, (qualname, as_signature) in enumerate(shown):
            unit = unit_for(f"{path}::{qualname}", graph, 1.0 / (rank + 1))
            if as_signature:
                unit.mode = SIG
            units.append(unit)
        return render({path: docs.get(path)}, units, graph, [path])


def test_a_definition_inside_an_elided_function_is_shown_though_not_named_under_it(tmp_path):
    """A JavaScript closure's `client.json = function` is named `client.json`, not
    `makeClient.client.json`: the function around it, shown as its signature, must not
    elide the lines of a member the slice shows whole."""
    filler = "".join(f"  const step{k} = base + '{k}';\n" for k in range(30))
    (tmp_path / "client.js").write_text(
        "export function makeClient(base) {\n  const client = {};\n" + filler
        + "  client.json = function (path) {\n    const url = base + path;\n"
        + "    return fetch(url).then((r) => r.json());\n  };\n  return client;\n}\n")
    text = _rendered(tmp_path, "client.js", [("makeClient", True), ("client.json", False)])
    assert "export function makeClient(base) {\n  // ... lines 2-32 omitted\n  client.json = function (path) {" in text
    assert "    return fetch(url).then((r) => r.json());\n  };" in text
    assert "lines elided" not in text
    # the rest of the framing function (two short lines) is shown as it is
    assert "  };\n  return client;\n}" in text


def test_a_frame_that_ends_inside_a_gap_marks_the_rest_of_its_body(tmp_path):
    steps = "".join(f"    step_{k} = compute({k})\n" for k in range(40))
    (tmp_path / "m.py").write_text(
        "def dispatch(request):\n    def pick(kind):\n        return TABLE[kind]\n" + steps
        + "    return pick(request.kind)\n\n\ndef other():\n    return 1\n")
    text = _rendered(tmp_path, "m.py", [("dispatch", True), ("dispatch.pick", False), ("other", False)])
    assert ("def dispatch(request):\n    def pick(kind):\n        return TABLE[kind]\n\n"
            "    # ... lines 4-44 omitted\n\ndef other():") in text, text


def test_a_go_group_member_is_framed_by_its_groups_opening_line(typed_ws):
    text = context_query(typed_ws, "`Void`", max_tokens=300).context
    section = text.split("// ledger.go\n", 1)[1].split("\n\n// ledger.", 1)[0]
    # Written without its keyword, `Void` alone would read as a stray name.
    assert "const (\n" in section and section.index("const (") < section.index("\tVoid")
    assert section.count("const (") == 1


def test_a_group_header_is_the_opening_line_of_the_group_holding_the_line():
    from memstrata.compressor.render import _group_header

    lines = GO_SOURCE.lstrip("\n").split("\n")
    void = next(i for i, ln in enumerate(lines, 1) if ln.strip() == "Void")
    (first, last) = _group_header(lines, void)
    assert first == last and lines[first - 1] == "const ("
    assert _group_header(lines, first) is None  # the group itself is in none
    field = next(i for i, ln in enumerate(lines, 1) if ln.strip() == "rows []uint64")
    assert _group_header(lines, field) is None  # a struct's field is not a group's member


def test_a_gap_shorter_than_its_marker_is_shown_as_it_is(typed_ws):
    from memstrata.compressor.render import _shown_instead

    assert _shown_instead(["}", ""], "// ... lines 9-10 omitted")
    assert not _shown_instead(["", ""], "// ... lines 9-10 omitted")  # nothing to say: a blank line
    long_comment = ["\t// Credit adds to the balance whatever the sign of the amount says."]
    assert not _shown_instead(long_comment, "\t// ... line 8 omitted")
    text = context_query(typed_ws, "`Debit` and `Credit`", max_tokens=300).context
    assert "\t// Credit adds to it.\n\tCredit\n" in text  # cheaper than "// ... line 7 omitted"
    assert "\t// ... line 5 omitted\n\tDebit" in text  # a longer comment keeps its marker, in the singular


def test_a_long_signature_is_shown_to_its_end_not_cut_mid_list():
    from memstrata.compressor.render import signature_end

    lines = ["public static IEnumerable<Error> Validate(",
             "    this IEnumerable<SpecificationProperty> specProps,",
             "    IEnumerable<Func<IEnumerable<SpecificationProperty>,",
             "    IEnumerable<Error>>> rules)",
             "{",
             "    return rules.SelectMany(rule => rule(specProps));",
             "}"]
    signature = " ".join(ln.strip() for ln in lines[:4])
    assert len(signature.replace(" ", "")) > 120
    assert signature_end(lines, 1, 7, signature, limit=None) == 4
    assert signature_end(lines, 1, 7, signature) == 3  # as much as a signature unit shows


def test_a_signature_shown_in_part_says_so(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    params = ",\n".join(f"    option_number_{k}: int = {k}" for k in range(12))
    (root / "opts.py").write_text(f"def configure(\n{params},\n) -> dict:\n" + "    x = 1\n" * 30 + "    return {{}}\n"
                                  + "".join(f"\n\ndef spare_{k}(x):\n    return x + {k}\n" for k in range(40)))
    with Workspace.open(root) as w:
        w.index()
        text = context_query(w, "`spare_3` and `configure`", max_tokens=200).context
    assert "def configure(" in text and "lines elided, the signature's end among them" in text
    assert "def spare_3(x):\n    return x + 3" in text


def test_a_long_run_of_decorators_above_a_signature_is_cut_short(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    options = "".join(f'@option("--flag-{k}", default={k}, help="Flag number {k} of the command.")\n'
                      for k in range(30))
    (root / "cli.py").write_text(
        "def option(*a, **k):\n    return lambda f: f\n\n\n"
        "def command(f):\n    return f\n\n\n"
        f"@command\n{options}def run_tool(**flags):\n" + "    total = 0\n" * 40 + "    return total\n\n\n"
        "@command\n@option('--one')\n@option('--two')\n@option('--three')\n"
        "def small_tool(**flags):\n" + "    total = 1\n" * 40 + "    return total\n\n\n"
        + "".join(f"def spare_{k}(x):\n    return x + {k}\n\n\n" for k in range(40)))
    with Workspace.open(root) as w:
        w.index()
        text = context_query(w, "`spare_3`, `run_tool` and `small_tool`", max_tokens=400).context
    # The first three decorator lines, an exact count of the rest, then the declaration.
    assert ('@command\n@option("--flag-0"' in text and '@option("--flag-1"' in text
            and "# ... 28 lines of decorators elided\ndef run_tool(**flags):\n" in text)
    assert "--flag-2" not in text
    # Four lines of decorators are shown as they are: a marker would cost about as much.
    assert "@command\n@option('--one')\n@option('--two')\n@option('--three')\ndef small_tool(**flags):" in text
    assert "def spare_3(x):\n    return x + 3" in text


def test_a_body_no_dearer_than_its_elision_marker_is_shown_whole(tmp_path):
    """A three-line function costs about what its signature and the "... 1 line elided" note
    cost: where the slice would show its signature, it shows its code, and counts it among the
    definitions shown whole."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "lib.rs").write_text(
        "pub fn long_one(x: u32) -> u32 {\n" + "".join(f"    let v{k} = step_{k}(x) + {k};\n" for k in range(12))
        + "".join(f"    let w{k} = x * {k} + {k};\n" for k in range(40)) + "    x\n}\n\n"
        + "".join(f"pub fn step_{k}(x: u32) -> u32 {{\n    x + {k}\n}}\n\n" for k in range(12)))
    with Workspace.open(root) as w:
        w.index()
        r = context_query(w, "what does long_one compute", max_tokens=300)
    shown = [k for k in range(12) if f"pub fn step_{k}(x: u32) -> u32 {{\n" in r.context]
    assert shown, r.context
    for k in shown:  # each callee shown is shown whole, never as "... 1 line elided"
        assert f"pub fn step_{k}(x: u32) -> u32 {{\n    x + {k}\n}}" in r.context
        assert f"lib.rs::step_{k}" in r.full_symbols
    assert "elided" in r.context.split("pub fn long_one")[1].split("\n")[1]  # a long body still is


DECLARATIONS = '''
export declare class Store {
  get(key: string): unknown
  /** Fetches the row stored under key. */
  fetchRow(key: string, fallback?: Row): Promise<Row>
  put(key: string, row: Row): void
}

declare module 'analytics-lib' {
  export function track(event: string): void
  export function createClient(key: string, region: string): Client
}
'''


def test_a_declaration_file_shows_the_declarations_asked_for_inside_their_class_or_module(tmp_path):
    """A `.d.ts` file holds declarations without bodies: a member asked for is its own line,
    framed by the class or module declaring it, like a method with a body."""
    (tmp_path / "types.d.ts").write_text(_padded(DECLARATIONS, "export declare function spare{k}(x: number): number\n"))
    with Workspace.open(tmp_path) as w:
        w.index()
        text = context_query(w, "`Store.fetchRow` and `createClient`", max_tokens=150).context
    assert "export declare class Store {\n" in text
    assert text.index("export declare class Store {") < text.index("  fetchRow(key: string, fallback?: Row): Promise<Row>")
    assert "declare module 'analytics-lib' {\n" in text
    assert text.index("declare module 'analytics-lib' {") < text.index("  export function createClient(key: string")
    assert "spare39" not in text
