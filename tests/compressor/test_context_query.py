"""context_query on the Python fixture project: ranking, rendering, budget, errors."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstrata.compressor import QueryError, context_query, count_tokens
from memstrata.compressor.navigation import NavigationError, find_symbol
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci
from tests.conftest import index_run_elsewhere, indexed_workspace

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "python_project"


@pytest.fixture
def ws(python_ws):
    return python_ws


def test_named_method_in_full_with_callers_above_unrelated(ws):
    r = context_query(ws, "AuthService.login and its callers", max_tokens=2000)
    # The method itself, verbatim and whole.
    assert "    def login(self, username: str, password: str) -> bool:" in r.context
    assert "        ok = constant_time_eq(hash_password(password), stored)" in r.context
    # Its callers, in full.
    assert '    ok = service.login(request["user"], request["password"])' in r.context
    assert '            self.auth.login(request["user"], request["password"])' in r.context
    assert {"app/auth/service.py::AuthService.login", "app/routes.py::login_route",
            "app/session.py::SessionMiddleware.__call__"} <= set(r.full_symbols)
    assert r.sources[0] == "app/auth/service.py"
    assert set(r.sources[1:3]) == {"app/routes.py", "app/session.py"}
    # Unrelated code ranks below the callers (or is left out entirely).
    if "app/reports.py" in r.sources:
        assert r.sources.index("app/reports.py") > r.sources.index("app/session.py")
    # Tests stay out by default.
    assert not any(s.startswith("tests/") for s in r.sources)


def test_file_headers_follow_sources_order_and_lines_are_verbatim(ws):
    r = context_query(ws, "how are passwords hashed and compared", max_tokens=800)
    headers = [line[2:] for line in r.context.splitlines() if line.startswith("# ") and "/" in line and "..." not in line]
    assert headers == r.sources
    texts = ci.file_texts(ws.store, r.sources)
    all_lines = {line for t in texts.values() for line in t.split("\n")}
    for line in r.context.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("# "):
            continue  # headers and elision markers
        assert line in all_lines, f"not verbatim: {line!r}"
    assert "app/util/crypto.py" in r.sources[:2]
    assert "def hash_password(password: str) -> str:" in r.context


def test_baseline_is_tokens_of_the_whole_source_files(ws):
    r = context_query(ws, "SessionMiddleware", max_tokens=4096)
    texts = ci.file_texts(ws.store, r.sources)
    assert r.baseline_tokens == sum(count_tokens(texts[p]) for p in r.sources)
    assert r.tokens == count_tokens(r.context)
    assert r.api_fields().keys() == {"context", "tokens", "baseline_tokens", "sources"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    budget=st.integers(min_value=1, max_value=2500),
    query=st.sampled_from([
        "AuthService.login and its callers", "hash_password", "session middleware login",
        "monthly report rendering", "BaseService subclasses", "what does login call",
    ]),
)
def test_budget_is_never_exceeded(ws, budget, query):
    r = context_query(ws, query, max_tokens=budget)
    assert r.tokens <= budget
    assert r.tokens == count_tokens(r.context)
    assert (r.context == "") == (r.sources == [])


def test_include_tests_brings_in_tests_that_exercise_the_seeds(ws):
    without = context_query(ws, "tests for AuthService.login", max_tokens=3000)
    with_tests = context_query(ws, "tests for AuthService.login", max_tokens=3000, include_tests=True)
    assert not any(s.startswith("tests/") for s in without.sources)
    assert "tests/test_auth.py" in with_tests.sources
    assert "def test_login_accepts_right_password():" in with_tests.context


def test_a_question_naming_test_code_only_says_to_include_tests(ws):
    without = context_query(ws, "test_login_accepts_right_password", max_tokens=2000)
    assert not any(s.startswith("tests/") for s in without.sources)
    assert "test_login_accepts_right_password is defined in test code only: ask again with include_tests " \
           "(--include-tests) to see it" in without.notes, without.notes
    with_tests = context_query(ws, "test_login_accepts_right_password", max_tokens=2000, include_tests=True)
    assert "tests/test_auth.py" in with_tests.sources
    assert not any("in test code only" in n for n in with_tests.notes)
    assert not any("in test code only" in n for n in context_query(ws, "AuthService.login", 2000).notes)


def test_degrades_full_to_signature_before_dropping(ws):
    roomy = context_query(ws, "AuthService.login and its callers", max_tokens=2000)
    tight = context_query(ws, "AuthService.login and its callers", max_tokens=160)
    assert tight.tokens <= 160
    assert set(tight.symbols) <= set(roomy.symbols)
    assert len(tight.full_symbols) < len(roomy.full_symbols)
    # The named method keeps its body as long as it fits ...
    assert "app/auth/service.py::AuthService.login" in tight.full_symbols
    # ... and below that it is shown as its signature rather than dropped.
    tiny = context_query(ws, "AuthService.login and its callers", max_tokens=60)
    assert tiny.tokens <= 60
    assert "def login(self, username: str, password: str) -> bool:" in tiny.context
    assert "app/auth/service.py::AuthService.login" not in tiny.full_symbols
    assert "lines elided" in tiny.context


@pytest.mark.parametrize(
    "query, max_tokens, message",
    [
        ("", 4096, "query is empty"),
        ("   \n\t ", 4096, "query is empty"),
        ("x" * 100_000, 4096, "query is too long .*: paste the part of the log or trace that matters"),
        ("login", 0, "at least 1"),
        ("login", -5, "at least 1"),
        ("login", 10**12, "at most"),
        ("login", "abc", "must be an integer"),
        ("login", 3.5, "must be an integer"),
        ("login", True, "must be an integer"),
        (None, 4096, "must be a string"),
    ],
)
def test_bad_input_gets_a_clear_error(ws, query, max_tokens, message):
    with pytest.raises(QueryError, match=message):
        context_query(ws, query, max_tokens=max_tokens)


def test_numeric_string_budget_and_non_ascii_query(ws):
    r = context_query(ws, "ログイン login 認証 é", max_tokens="300")
    assert 0 < r.tokens <= 300
    assert "app/auth/service.py" in r.sources


def test_query_naming_nothing_gets_an_overview_and_says_so(ws):
    # No word of it is a name, a path or a word of the code: an empty answer helps nobody, so the
    # slice shows the definitions the rest of the project uses most, and the note says what it is.
    for query in ("zebra quantum flux capacitor", "how does this work?"):
        r = context_query(ws, query, max_tokens=1000)
        assert 0 < r.tokens <= 1000 and r.sources and r.context
        assert any(n.startswith("nothing in the project matches the query") and "overview" in n for n in r.notes)
        # Most used first: the service every route and the session go through, and the hash.
        assert r.sources[0] == "app/auth/service.py"
        assert "app/util/crypto.py::hash_password" in r.symbols
        assert not any(p.startswith("tests/") for p in r.sources)
        assert r.baseline_tokens == sum(count_tokens((FIXTURE / p).read_text()) for p in r.sources)
    assert context_query(ws, "zebra quantum flux capacitor", max_tokens=1000).context == r.context
    small = context_query(ws, "zebra quantum flux capacitor", max_tokens=60)
    assert 0 < small.tokens <= 60
    # A budget no definition fits: the note says nothing is shown, not "an overview" beside "too
    # small for any matching code" (nothing matched).
    none = context_query(ws, "zebra quantum flux capacitor", max_tokens=5)
    assert none.context == "" and none.tokens == 0
    assert none.notes == ["nothing in the project matches the query (no word of it is a name, a path or a word of "
                          "the code), and max_tokens=5 is too small for an overview of the project; ask with the "
                          "names of functions, classes or files"]


def test_edit_is_reflected_after_reindex(tmp_path):
    root = tmp_path / "p"
    shutil.copytree(FIXTURE, root)
    with Workspace.open(root) as w:
        w.index()
        before = context_query(w, "AuthService.login and its callers", max_tokens=3000)
        assert "app/admin.py" not in before.sources
        (root / "app" / "admin.py").write_text(textwrap.dedent('''
            from app.auth.service import AuthService


            def admin_login(user, password):
                return AuthService().login(user, password)
        '''))
        w.index()
        after = context_query(w, "AuthService.login and its callers", max_tokens=3000)
        assert "app/admin.py" in after.sources
        # Every direct caller is shown in full, not just the strongest one.
        assert {"app/admin.py::admin_login", "app/routes.py::login_route",
                "app/session.py::SessionMiddleware.__call__"} <= set(after.full_symbols)


def test_a_slice_of_files_changed_since_indexing_says_so(tmp_path):
    # Nothing watches this workspace: what the slice shows of a file edited since (a branch
    # switch, an editor) is the indexed text, and a note says which files that is.
    root = tmp_path / "p"
    shutil.copytree(FIXTURE, root)
    with Workspace.open(root) as w:
        w.index()
        assert not w.watching
        fresh = context_query(w, "AuthService.login", max_tokens=600)
        assert not any("changed on disk" in n for n in fresh.notes)
        service = root / "app" / "auth" / "service.py"
        service.write_text(service.read_text() + "\n\ndef added_later():\n    return 1\n")
        stale = context_query(w, "AuthService.login", max_tokens=600)
        assert stale.context == fresh.context
        assert any(n.startswith("app/auth/service.py changed on disk since indexed") for n in stale.notes), \
            stale.notes
        w.index()
        assert not any("changed on disk" in n for n in context_query(w, "AuthService.login", max_tokens=600).notes)
        # A checkout or `touch` that moves the modification time alone changes nothing shown.
        st = service.stat()
        os.utime(service, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
        assert not any("changed on disk" in n for n in context_query(w, "AuthService.login", max_tokens=600).notes)
        assert w.status().status == "ready"


def test_a_slice_asked_before_the_watcher_caught_up_with_an_edit_says_so(tmp_path):
    # The watcher re-indexes an edited file after its debounce; a question asked in between is
    # answered from the indexed text, and the note names the file (not only "indexing").
    root = tmp_path / "p"
    shutil.copytree(FIXTURE, root)
    with Workspace.open(root) as w:
        w.index()
        w.start_watching(debounce=60)  # long enough that the edit below stays pending
        assert w.watching
        service = root / "app" / "auth" / "service.py"
        service.write_text(service.read_text() + "\n\ndef added_later():\n    return 1\n")
        stale = context_query(w, "AuthService.login", max_tokens=600)
        assert any(n.startswith("app/auth/service.py changed on disk since indexed: shown as indexed "
                                "(the watcher is re-indexing it") for n in stale.notes), stale.notes


def test_answers_from_a_partial_index_and_says_so(tmp_path):
    root = tmp_path / "p"
    shutil.copytree(FIXTURE, root)
    with Workspace.open(root) as w:
        w.index()
    # Another process holds the writer lock with the index marked in progress,
    # as a cold index run does.
    with index_run_elsewhere(root), Workspace.open(root) as w:
        r = context_query(w, "hash_password", max_tokens=500)
        assert "def hash_password" in r.context
        assert any("index is indexing" in n for n in r.notes)
        assert w.status().status == "indexing"


def test_a_question_of_everyday_words_only_gets_their_full_text_matches(tmp_path):
    # "comments", "review", "fixes", "updated" are the generic words of commit messages and
    # requests, never a seed of their own; when nothing else in the question matches, the
    # slice is built from their plain full-text matches instead of coming back empty.
    (tmp_path / "notes.py").write_text(textwrap.dedent('''\
        def merge_notes(first, second):
            """Join two reviewers' review comments, keeping the order they were written in."""
            return [*first, *second]


        def word_count(text):
            return len(text.split())
        '''))
    (tmp_path / "clock.py").write_text("def now():\n    return 0\n")
    ws = Workspace.open(tmp_path)
    try:
        ws.index()
        r = context_query(ws, "Updated review comments and some fixes", max_tokens=1000)
        assert "notes.py::merge_notes" in r.full_symbols
        assert "def merge_notes(first, second):" in r.context
        assert "clock.py" not in r.sources
        assert any("everyday words" in n for n in r.notes)
        # Words that match nothing at all get the overview, said to be one.
        r = context_query(ws, "zebra quantum flux capacitor", max_tokens=1000)
        assert r.sources and any("nothing in the project matches" in n and "overview" in n for n in r.notes)
    finally:
        ws.close()


def test_a_batch_written_before_the_graph_takes_it_is_answered_in_step(tmp_path):
    """A watcher commits a batch a moment before it applies it to the graph: a question in
    between reads the new texts, and must cut them by the new spans, not the old ones."""
    root = tmp_path / "p"
    (root / "pkg").mkdir(parents=True)
    body = "\n".join(f"    total += step_{i}(value)" for i in range(60))
    (root / "pkg" / "calc.py").write_text(
        f"def accumulate_steps(value):\n    total = 0\n{body}\n    return total\n\n\n"
        "def tiny_helper(value):\n    return value\n")
    with Workspace.open(root) as ws:
        ws.index()
        assert "pkg/calc.py::accumulate_steps" in context_query(ws, "accumulate_steps", 2000).full_symbols
        # The file shrinks: the old spans run past the new text's end.
        (root / "pkg" / "calc.py").write_text(
            "def tiny_helper(value):\n    return value + 1\n\n\ndef accumulate_steps(value):\n    return value\n")
        ws.indexer.update_paths(["pkg/calc.py"])  # written to the index, not yet to the graph
        r = context_query(ws, "accumulate_steps and tiny_helper", 2000)
        assert "def accumulate_steps(value):\n    return value" in r.context
        assert "    return value + 1" in r.context
        assert "step_0" not in r.context


def test_a_budget_too_small_for_the_named_code_says_so(ws):
    """At a budget the named method does not fit in, what fits is a neighbour: the note says the
    named one was left out, so nobody takes the neighbour for the answer."""
    r = context_query(ws, "AuthService.login", max_tokens=40)
    assert "app/auth/service.py::AuthService.login" not in r.symbols and r.symbols
    assert "max_tokens=40 is too small for AuthService.login, which the question names: shown is what fits" \
        in r.notes, r.notes
    r = context_query(ws, "AuthService.login", max_tokens=2000)
    assert not any("too small" in n for n in r.notes), r.notes


def test_a_name_the_project_does_not_define_is_said_so(ws):
    r = context_query(ws, "how does ZebraQuuxHandler hash passwords", max_tokens=2000)
    assert "ZebraQuuxHandler is not defined in this project: shown is the code closest to the rest of the " \
           "question" in r.notes, r.notes
    # Names it does define, and capitalised words of a sentence, are no such names.
    # Nor are acronyms in capitals, which questions use as words.
    for question in ("AuthService.login and its callers", "How are passwords hashed", "`login` callers",
                     "how are HTTP passwords hashed over SSL"):
        assert not any("not defined" in n for n in context_query(ws, question, 2000).notes), question
    r = context_query(ws, "why does `hash_pasword()` fail in os.path.join", max_tokens=2000)
    assert "hash_pasword, os.path.join are not defined in this project: shown is the code closest to the " \
           "rest of the question" in r.notes, r.notes
    # A question that is only such a name has no rest: what is shown is closest to its name's words.
    r = context_query(ws, "`hash_pasword`", max_tokens=2000)
    assert "hash_pasword is not defined in this project: shown is the code closest to the words of its " \
           "name" in r.notes, r.notes
    r = context_query(ws, "how does hash_pasword work?", max_tokens=2000)
    assert any("closest to the words of its name" in n for n in r.notes), r.notes


def test_a_name_written_since_the_index_was_is_not_called_undefined_alone(tmp_path):
    # A definition added to a file after the last index run is not in the index: with nothing
    # keeping it in step (a one-shot query, the resident process), "not defined in this project"
    # alone would be untrue, so a note says the files are ahead of the index.
    files = {"app/prices.py": "def net_price(amount, rate):\n    return amount * (1 - rate)\n"}
    with indexed_workspace(tmp_path / "p", files) as w:
        notes = context_query(w, "`gross_price`", max_tokens=500).notes
        assert any(n.startswith("gross_price is not defined") for n in notes), notes
        assert not any("the index is" in n for n in notes), notes
        # That note says what is shown (the code closest to the words of the name), also when those
        # are everyday words only: one note, not a second one saying so in other words.
        (w.root / "app/totals.py").write_text('def update_totals(rows):\n    """Update totals after a new fix."""\n'
                                             "    return sum(rows)\n")
        w.index()
        notes = context_query(w, "`NewFix`", max_tokens=500).notes
        assert notes == ["NewFix is not defined in this project: shown is the code closest to the words of its name"]
        with (w.root / "app/prices.py").open("a") as f:
            f.write("\n\ndef gross_price(amount, rate):\n    return amount * (1 + rate)\n")
        notes = context_query(w, "`gross_price`", max_tokens=500).notes
        assert ("the index is stale (files changed since the last index run): a definition written since "
                "is not in it yet (run memstrata index, then ask again)") in notes, notes
        with pytest.raises(NavigationError, match=r"no symbol matches 'gross_price' \(the index is stale: "):
            find_symbol(w, "gross_price")
        w.index()
        assert not any("not defined" in n or "the index is" in n
                       for n in context_query(w, "`gross_price`", max_tokens=500).notes)


def test_a_commit_type_before_its_scope_is_no_undefined_name(ws):
    # `fix(auth): ...` reads like a call of `fix`, but a conventional commit's type and scope name
    # the kind of change and the component: the seeds read them so, and so do the notes.
    for question in ("fix(auth): hash passwords with a salt", "feat(auth)!: hash passwords with a salt"):
        notes = context_query(ws, question, max_tokens=2000).notes
        assert not any("not defined" in n for n in notes), (question, notes)
    notes = context_query(ws, "fix(auth): hash_pasword() drops the salt", max_tokens=2000).notes
    assert any(n.startswith("hash_pasword is not defined") for n in notes), notes


def test_a_project_without_code_gets_an_empty_answer_that_says_why(tmp_path):
    (tmp_path / "README.md").write_text("Nothing here yet.\n")
    with Workspace.open(tmp_path) as w:
        w.index()
        r = context_query(w, "how does this work?", max_tokens=500)
    assert (r.context, r.tokens, r.baseline_tokens, r.sources) == ("", 0, 0, [])
    assert r.notes == ["nothing in the project matches the query (no code is indexed)"]
