"""Selection by expected value per token: what a slice spends its budget on."""

from __future__ import annotations

import textwrap
from dataclasses import asdict

import pytest

from memstrata.compressor import context_query
from memstrata.compressor.analyze import NameIndex, find_seeds, split_scope
from memstrata.compressor.render import FULL, Unit
from memstrata.compressor.slice import _Evidence, _holds_definitions, target_probability
from memstrata.compressor.terms import terms_of
from memstrata.indexer.history import RecentChanges
from memstrata.indexer.workspace import Workspace

from ..conftest import indexed_workspace


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def _body(name: str, topic: str, n: int) -> str:
    lines = [f"def {name}(payload, options=None):", f'    """Handle {topic} for the payload."""']
    for i in range(n):
        lines.append(f"    step_{i} = payload.get('{topic}_{i}', {i})  # {topic} detail {i}")
    lines.append(f"    return {' + '.join(f'step_{i}' for i in range(n))}")
    return "\n".join(lines) + "\n\n\n"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("selection")
    topics = ["invoice", "refund", "ledger", "payout", "currency", "tax"]
    for t in topics:
        text = "".join(_body(f"{t}_{k}", t, 12) for k in ("parse", "check", "store", "render"))
        write(root, f"billing/{t}.py", text)
    write(root, "billing/api.py", "from billing.refund import refund_check, refund_store\n\n\n"
          "def issue_refund(payload):\n    refund_check(payload)\n    return refund_store(payload)\n")
    write(root, "shims/compat.py", "def io(stream):\n    return stream\n")
    write(root, "io/simplex.py", "class SimplexStream:\n    def write(self, data):\n        if not data:\n"
          "            return 0\n        return len(data)\n")
    with Workspace.open(root) as w:
        w.index()
        yield w


def test_a_larger_budget_buys_bodies_not_only_signatures(ws):
    question = "refund check and store go wrong when the payload has a refund detail"
    small = context_query(ws, question, max_tokens=900)
    large = context_query(ws, question, max_tokens=3000)
    assert len(large.full_symbols) > len(small.full_symbols)
    # What the question is most about is whole at both budgets.
    assert {"billing/refund.py::refund_check", "billing/refund.py::refund_store"} <= set(small.full_symbols)


def test_the_budget_is_never_exceeded(ws):
    for budget in (200, 600, 1500, 4000):
        sl = context_query(ws, "how are invoices and refunds rendered", max_tokens=budget)
        assert sl.tokens <= budget


def _p(rank=3, ratio=0.5, named=False, member_of_named=False, kind="function", lines=20, lexical_rank=None,
       file_lexical_rank=None, age=None, file_age=None, members=True) -> float:
    node = "pkg/mod.py::target"
    history = None
    if file_age is not None:
        history = RecentChanges("0" * 40, "", {"pkg/mod.py": sorted(
            [(500, 500, file_age)] + ([(10, 10, age)] if age is not None else []))})
    evidence = _Evidence(lexical={} if lexical_rank is None else {node: lexical_rank},
                         file_lexical={} if file_lexical_rank is None else {"pkg/mod.py": file_lexical_rank},
                         history=history)
    unit = Unit(node, "pkg/mod.py", 1.0, FULL, 5, 5 + lines - 1, kind, None)
    container = kind in ("class", "struct", "interface", "type") and members
    return target_probability(evidence.features(rank, ratio, unit, named, member_of_named, container))


def test_target_probability_follows_the_rankings_confidence():
    p = _p
    assert p(rank=0) > p(rank=3) > p(rank=40)
    assert p(ratio=1.0) > p(ratio=0.5) > p(ratio=0.01)
    assert p(lexical_rank=0) > p(lexical_rank=30) > p()
    # The file where the question's words concentrate holds the change more often (a file far
    # down the full-text hits' files is no likelier than one the search never reached).
    assert p(file_lexical_rank=0) > p(file_lexical_rank=1) > p(file_lexical_rank=3)
    assert p(file_lexical_rank=0) > p(file_lexical_rank=1) > p()
    assert p(kind="class") < p(kind="function")
    # The model weighs what a candidate holds, not its kind: a type with nothing defined inside
    # (see test_only_a_type_with_definitions_inside_counts_as_a_container) scores as a function.
    assert p(kind="interface", members=False) == p(kind="function") > p(kind="interface")
    assert p(member_of_named=True) > p()
    assert all(0.0 < p(rank=r, ratio=x) < 1.0 for r in (0, 10, 150) for x in (4.0, 1.0, 1e-9))


def test_a_python_special_method_is_a_likelier_target():
    """A class's behaviour lives in its special methods (``__call__``, ``__eq__``, ``__init__``,
    a library's own ``__foo__`` hook): ranked alike, one of them is the likelier target.  Only
    Python's: a name with underscores around it means nothing special in other languages."""
    def p(path: str, name: str) -> float:
        unit = Unit(f"{path}::Klass.{name}", path, 1.0, FULL, 5, 24, "method", f"{path}::Klass")
        return target_probability(_Evidence().features(3, 0.5, unit, False, False, False))

    for name in ("__call__", "__init__", "__rich_console__"):
        assert p("pkg/mod.py", name) > p("pkg/mod.py", "call") * 1.3
        assert p("pkg/mod.pyi", name) == p("pkg/mod.py", name)
    assert p("pkg/mod.py", "__") == p("pkg/mod.py", "call")  # no name between the underscores
    assert p("pkg/mod.py", "_____") == p("pkg/mod.py", "call")
    assert p("pkg/mod.py", "__eq__:2") == p("pkg/mod.py", "__eq__")  # defined again under another branch
    assert p("src/mod.js", "__call__") == p("src/mod.js", "call")


def test_a_rust_poll_method_is_a_likelier_target():
    """An async type's behaviour lives in its poll methods (``Future::poll``, ``poll_read``,
    ``poll_shutdown``): ranked alike, one of them is the likelier target.  Only a Rust method's:
    a Python or Go function named `poll` is a name like any other."""
    def p(path: str, qual: str) -> float:
        unit = Unit(f"{path}::{qual}", path, 1.0, FULL, 5, 24, "method", f"{path}::Conn")
        return target_probability(_Evidence().features(3, 0.5, unit, False, False, False))

    for name in ("poll", "poll_read", "poll_shutdown", "poll_next:2"):
        assert p("src/conn.rs", f"Conn.{name}") > p("src/conn.rs", "Conn.read") * 1.5
    assert p("src/conn.rs", "Conn.polling") == p("src/conn.rs", "Conn.read")
    assert p("src/conn.rs", "poll_fn") == p("src/conn.rs", "read_fn")  # a free function drives no state
    assert p("pkg/conn.py", "Conn.poll") == p("pkg/conn.py", "Conn.read")
    assert p("conn.go", "Conn.poll") == p("conn.go", "Conn.read")


def test_a_python_definition_the_questions_words_name_is_a_likelier_target():
    """A method of a large class ranks below its class's other members; the question's words
    spelling its name ("if-range" -> `if_range`, "cell length" -> `cell_len`) make it the
    likelier target.  Python's only (fitted there)."""
    def p(path: str, name: str, question: str) -> float:
        unit = Unit(f"{path}::Request.{name}", path, 1.0, FULL, 5, 24, "method", f"{path}::Request")
        evidence = _Evidence(question_terms=frozenset(terms_of(question)))
        return target_probability(evidence.features(3, 0.5, unit, False, False, False))

    q = "if-range discards weak etags"
    assert p("pkg/request.py", "if_range", q) > p("pkg/request.py", "accept_ranges", q) > p("pkg/request.py", "host", q)
    assert p("pkg/request.py", "if_range", q) > 1.25 * p("pkg/request.py", "host", q)
    assert p("pkg/request.py", "if_range", "") == p("pkg/request.py", "host", "")
    assert p("pkg/request.py", "IfRange", q) == p("pkg/request.py", "if_range", q)
    assert p("src/request.js", "if_range", q) == p("src/request.js", "host", q)


def test_lines_changed_lately_make_a_likelier_target():
    """Work comes in series: what the last commits (or uncommitted edits)
    changed is likelier to be what a question is about, the newer the more."""
    p = _p
    assert p(age=0, file_age=0) > p(age=1, file_age=1) > p(age=20, file_age=20) > p()
    # Only the definition's own lines count, not a change elsewhere in its file.
    assert p(age=3, file_age=3) > 2 * p(file_age=3)


@pytest.mark.parametrize("message, scope", [
    ("io: handle empty writes", "io: "),
    ("fix(parser): keep comments", "fix(parser): "),
    ("tokio-util, net: stop after EOF", "tokio-util, net: "),
    ("Fix: capitalised words are prose", ""),
    ("Add `io` support", ""),
])
def test_a_commit_scope_is_split_off(message, scope):
    assert split_scope(message)[0] == scope


def test_a_commit_scope_is_path_evidence_not_a_named_symbol(ws):
    graph = ws.graph
    names = NameIndex(graph)
    scoped = find_seeds("io: handle empty writes in the simplex stream", graph, names, ws.store, False)
    assert "shims/compat.py::io" not in scoped.named
    assert scoped.path_boost("io/simplex.py") > 1.0
    # Written as code in the message body, the same word still names the function.
    named = find_seeds("make `io()` return the stream unchanged", graph, names, ws.store, False)
    assert "shims/compat.py::io" in named.named


def test_a_type_shown_whole_does_not_hide_methods_written_elsewhere(tmp_path):
    """A Rust `impl` (like a Go method) is named under its type but written
    outside the type's lines: showing the type whole must not drop it."""
    write(tmp_path, "src/lib.rs", """\
        pub struct Counter {
            value: u64,
        }

        impl Counter {
            pub fn bump(&mut self) -> u64 {
                self.value = self.value.wrapping_add(1);
                self.value
            }

            pub fn reset(&mut self) {
                self.value = 0;
            }
        }
        """)
    with Workspace.open(tmp_path) as w:
        w.index()
        sl = context_query(w, "`Counter` bump overflows when the value wraps", max_tokens=1000)
    assert "src/lib.rs::Counter" in sl.full_symbols
    assert "src/lib.rs::Counter.bump" in sl.symbols
    assert "self.value = self.value.wrapping_add(1);" in sl.context


def test_a_body_is_worth_what_is_nested_in_it(tmp_path):
    from memstrata.compressor.render import unit_for
    from memstrata.compressor.slice import nested_worth

    root = tmp_path / "nested"
    write(root, "rules.py", """
        def create(context):
            def check(node):
                return node

            def report(node):
                return check(node)

            return report


        class Rule:
            def run(self):
                return 1


        def other():
            return 2
        """)
    with Workspace.open(root) as w:
        w.index()
        graph = w.graph
        nodes = ["rules.py::create", "rules.py::create.check", "rules.py::create.report", "rules.py::Rule",
                 "rules.py::Rule.run", "rules.py::other"]
        units = {n: unit_for(n, graph, 1.0) for n in nodes}
        p = {"rules.py::create": 0.1, "rules.py::create.check": 0.3, "rules.py::create.report": 0.2,
             "rules.py::Rule": 0.05, "rules.py::Rule.run": 0.4, "rules.py::other": 0.5}
        worth = nested_worth(p, units, graph)
        assert worth["rules.py::create"] == pytest.approx(0.5)
        assert "rules.py::Rule" not in worth  # a class is not shown whole for its members' sake
        assert "rules.py::other" not in worth and "rules.py::create.check" not in worth


def test_a_large_likely_body_goes_first_when_small_offers_would_crowd_it_out():
    """Best value per token first is a poor plan when one body fills most of
    the budget: five small offers slightly denser than a long, likely target
    leave no room for it, though it alone is worth more than all of them."""
    from memstrata.compressor.render import SIG
    from memstrata.compressor.slice import UNIT_FRAMING, _large_body_first, _plan_value

    body_estimate = {"big": 900 - UNIT_FRAMING, **{f"s{i}": 100 - UNIT_FRAMING for i in range(5)}}
    worth_of = {("big", FULL): 0.9, **{(f"s{i}", FULL): 0.12 for i in range(5)}}
    offers = sorted([(-(0.9 / 900), 0, "big", FULL)] + [(-(0.12 / 100), i + 1, f"s{i}", FULL) for i in range(5)])
    assert offers[0][2] == "s0"  # by value per token the small ones come first
    greedy = _plan_value(offers, worth_of, body_estimate, 1000, 1000)
    reordered = _large_body_first(offers, worth_of, body_estimate, 1000, 1000)
    assert reordered[0][2] == "big"
    assert _plan_value(reordered, worth_of, body_estimate, 1000, 1000) > greedy
    # When the small offers are worth more together, the order stays as it was.
    worth_of.update({(f"s{i}", FULL): 0.5 for i in range(5)})
    offers = sorted([(-(0.9 / 900), 0, "big", FULL)] + [(-(0.5 / 100), i + 1, f"s{i}", FULL) for i in range(5)])
    assert _large_body_first(offers, worth_of, body_estimate, 1000, 1000) == offers
    # Named offers (taken first whatever they cost) stay ahead of the large body.
    named = [(-float("inf"), 9, "named", SIG)]
    worth_of[("named", SIG)] = 0.0
    worth_of.update({(f"s{i}", FULL): 0.12 for i in range(5)})
    offers = named + sorted([(-(0.9 / 900), 0, "big", FULL)] + [(-(0.12 / 100), i + 1, f"s{i}", FULL) for i in range(5)])
    assert [o[2] for o in _large_body_first(offers, worth_of, body_estimate, 1000, 1000)[:2]] == ["named", "big"]


def test_only_a_type_with_definitions_inside_counts_as_a_container(tmp_path):
    files = {"src/api.ts": ("export interface Options {\n  retries: number;\n}\n\n"
                            "export type Mode = 'fast' | 'safe';\n\n"
                            "export class Client {\n  send(): void {}\n}\n"),
             "enc/json.go": ("package enc\n\ntype jsonEncoder struct{}\n\nfunc (e *jsonEncoder) Encode() {}\n\n"
                             "type Entry struct{}\n")}
    with indexed_workspace(tmp_path / "types", files) as w:
        g = w.graph
        assert _holds_definitions(g, "enc/json.go::jsonEncoder")  # its methods are beside it, not in it
        assert not _holds_definitions(g, "enc/json.go::Entry")
        assert not _holds_definitions(g, "src/api.ts::Options")
        assert not _holds_definitions(g, "src/api.ts::Mode")
        assert _holds_definitions(g, "src/api.ts::Client")
        assert not _holds_definitions(g, "src/api.ts::Client.send")


def test_fill_nothing_reached_is_offered_as_when_every_unit_was_made_up_front(tmp_path, monkeypatch):
    """Fill that neither the ranking nor search reached becomes a unit only when selection gets
    to it (most of it never does): the slices are byte for byte those of making them all first."""
    import memstrata.compressor.slice as slice_module

    # 240 small functions calling across four modules: the ranking reaches more of them than
    # it keeps (MAX_CANDIDATES), and the rest is fill that search did not find either.
    files = {}
    for k in range(4):
        imports = "".join(f"from shop.part{o} import *\n" for o in range(4) if o != k)
        files[f"shop/part{k}.py"] = imports + "\n\n" + "".join(
            f"def fn{k}x{j}(value):\n    \"\"\"Sum of the neighbours' results.\"\"\"\n"
            f"    return fn{(k + 1) % 4}x{(j * 7 + 1) % 60}(value)"
            f" + fn{(k + 2) % 4}x{(j * 3 + 2) % 60}(value) + fn{k}x{(j + 1) % 60}(value)\n\n\n" for j in range(60))
    workspace = indexed_workspace(tmp_path, files)
    questions = ["fn0x3 and its callers", "shop/part1.py", "what does fn2x7 return"]
    budgets = [300, 1200, 4096, 12000]
    unreached_nodes: set[str] = set()
    real = slice_module.scored_candidates

    def counting(*args, unreached=None, **kwargs):
        yield from real(*args, unreached=unreached, **kwargs)
        unreached_nodes.update(node for _i, node, _score in unreached or ())

    def eager(*args, unreached=None, **kwargs):
        return real(*args, **kwargs)

    try:
        monkeypatch.setattr(slice_module, "scored_candidates", counting)
        lazy = {(q, b): asdict(context_query(workspace, q, max_tokens=b)) for q in questions for b in budgets}
        # The lazy path was taken, and selection got far enough to make some of those units.
        assert any(unreached_nodes & set(fields["symbols"]) for fields in lazy.values())
        monkeypatch.setattr(slice_module, "scored_candidates", eager)
        for (q, b), fields in lazy.items():
            assert asdict(context_query(workspace, q, max_tokens=b)) == fields, (q, b)
    finally:
        workspace.close()
