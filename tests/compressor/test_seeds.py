"""How a question becomes seeds: noise removed, qualified names in every
common form, selectivity, English words, path and directory evidence, and a
budget that is used when there is relevant code to show."""

from __future__ import annotations

import textwrap

import pytest

from memstrata.compressor import context_query
from memstrata.compressor.analyze import NameIndex, Seeds, clean_query, find_seeds
from memstrata.compressor.slice import _best_symbols
from memstrata.indexer.workspace import Workspace

from ..conftest import indexed_workspace


def test_noise_is_removed_before_seeding():
    message = textwrap.dedent("""\
        Fix locking for MySQL (#1234), see https://example.org/issues/99 and gh-42

        Reverts 3f2a9c1e7b; closes #77.
        Change-Id: I0123456789abcdef0123456789abcdef01234567
        Signed-off-by: Ann Example <ann@example.org>
        Co-authored-by: Bob <bob@example.org>
        """)
    cleaned = clean_query(message)
    for noise in ("1234", "example.org", "gh-42", "3f2a9c1e7b", "#77", "Change-Id", "I0123456789",
                  "Signed-off-by", "Ann", "bob@"):
        assert noise not in cleaned
    assert "Fix locking for MySQL" in cleaned


def test_sphinx_roles_keep_their_target():
    assert "`.Select.with_for_update`" in clean_query(":meth:`.Select.with_for_update` and :class:`~sqlalchemy.Row`")
    assert ":meth:" not in clean_query(":py:meth:`Row.keys`")


FILES = {
    "pkg/__init__.py": "",
    "pkg/sql/__init__.py": "",
    "pkg/sql/selectable.py": '''
        class Select:
            def with_for_update(self, nowait=False):
                """Lock the selected rows."""
                return self._locking(nowait)

            def _locking(self, nowait):
                return nowait


        class Join:
            def select(self):
                return Select()
    ''',
    "pkg/dialects/__init__.py": "",
    "pkg/dialects/mysql/__init__.py": "",
    "pkg/dialects/mysql/compiler.py": '''
        class MySQLCompiler:
            def for_update_clause(self, select):
                """Render FOR UPDATE for MySQL."""
                return " FOR UPDATE"

            def version(self):
                return 8
    ''',
    "pkg/dialects/oracle/__init__.py": "",
    "pkg/dialects/oracle/compiler.py": '''
        class OracleCompiler:
            def for_update_clause(self, select):
                """Render FOR UPDATE for Oracle."""
                return " FOR UPDATE NOWAIT"
    ''',
    "pkg/engine.py": '''
        def version():
            return "1.0"


        def select(*columns):
            return columns


        def statement(text):
            return text
    ''',
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("seeds") / "proj"
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    for i in range(40):  # a common method name defined in many places
        (root / "pkg" / f"model_{i}.py").write_text(f"class Model{i}:\n    def save(self):\n        return {i}\n")
    with Workspace.open(root) as w:
        w.index()
        yield w


def seeds(ws, query):
    graph = ws.graph
    return find_seeds(query, graph, NameIndex(graph), ws.store, include_tests=False)


@pytest.mark.parametrize("query", [
    "Fix :meth:`.Select.with_for_update` with nowait",
    "Fix :meth:`Select.with_for_update` with nowait",
    "Fix pkg.sql.selectable.Select.with_for_update with nowait",
    "Fix `with_for_update()` with nowait",
    "Fix with_for_update() with nowait",
])
def test_qualified_references_in_every_common_form(ws, query):
    s = seeds(ws, query)
    assert "pkg/sql/selectable.py::Select.with_for_update" in s.named


@pytest.mark.parametrize("query", ["see pkg/sql/selectable.py:12 for the lock", "see selectable.py for the lock"])
def test_paths_with_and_without_line_numbers(ws, query):
    s = seeds(ws, query)
    assert "pkg/sql/selectable.py" in s.files
    assert s.path_boost("pkg/sql/selectable.py") > 1.0


def test_english_words_count_as_names_only_when_phrased_as_code(ws):
    prose = seeds(ws, "select the version of the statement")
    assert not prose.named
    assert not (set(prose.symbols) & {"pkg/engine.py::select", "pkg/engine.py::version", "pkg/engine.py::statement"})
    for code in ("call `select` here", "call select() here", "call engine.select here"):
        assert "pkg/engine.py::select" in seeds(ws, code).named, code


def test_a_name_defined_in_many_places_is_a_weak_seed(ws):
    s = seeds(ws, "why does `save` lose data, and `with_for_update` too")
    saves = [v for n, v in s.symbols.items() if n.endswith(".save")]
    assert len(saves) == 40
    assert sum(saves) < s.symbols["pkg/sql/selectable.py::Select.with_for_update"]
    assert not any(n.endswith(".save") for n in s.named)


def test_a_directory_the_question_names_raises_what_lives_there(ws):
    r = context_query(ws, "FOR UPDATE clause rendering on mysql", max_tokens=300)
    assert r.sources[0] == "pkg/dialects/mysql/compiler.py"
    r = context_query(ws, "FOR UPDATE clause rendering on oracle", max_tokens=300)
    assert r.sources[0] == "pkg/dialects/oracle/compiler.py"
    # A method defined on several classes: the one in the named directory wins.
    s = seeds(ws, "`for_update_clause` in the mysql dialect")
    assert s.named == {"pkg/dialects/mysql/compiler.py::MySQLCompiler.for_update_clause"}


def test_the_budget_is_filled_when_relevant_code_exists(ws):
    # One named symbol with no edges: the ranking alone would show one signature.
    r = context_query(ws, "`Model7.save` and anything that saves a model", max_tokens=400)
    # Whole, by itself or inside its (small) class shown whole.
    assert r.symbols[0] in ("pkg/model_7.py::Model7.save", "pkg/model_7.py::Model7")
    assert "pkg/model_7.py::Model7.save" in r.full_symbols
    assert r.tokens > 200
    assert len(r.symbols) > 3


def test_the_class_the_question_mentions_picks_among_namesakes(ws):
    s = seeds(ws, "OracleCompiler renders `for_update_clause` wrong")
    assert "pkg/dialects/oracle/compiler.py::OracleCompiler.for_update_clause" in s.named
    assert "pkg/dialects/mysql/compiler.py::MySQLCompiler.for_update_clause" not in s.named


def test_a_file_stem_of_several_words_used_in_any_order(tmp_path):
    files = {f"{stem}.go": f"package shells\n\nfunc {stem.title().replace('_', '')}() {{}}\n"
             for stem in ("fish_completions", "bash_completionsV2", "command")}
    with indexed_workspace(tmp_path / "shells", files) as w:
        s = seeds(w, "quote args in fish shell completion")
        assert s.path_boost("fish_completions.go") > 1.0
        assert s.path_boost("bash_completionsV2.go") == 1.0
        assert seeds(w, "print help for bash along other completions").path_boost("bash_completionsV2.go") > 1.0


def test_a_distinctive_word_of_a_file_stem_names_the_file(tmp_path):
    # `<area>_<topic>` files are asked about by their topic alone; a word many stems share says nothing.
    files = {f"{stem}.go": f"package flags\n\nfunc {stem.title().replace('_', '')}() {{}}\n"
             for stem in ("flag_mutex", "flag_bool", "flag_int", "flag_string", "command", "command_parse")}
    files["examples/flag_mutex.go"] = "package main\n\nfunc Demo() {}\n"
    with indexed_workspace(tmp_path / "flags", files) as w:
        s = seeds(w, "use indexed loops to find mutex violations")
        assert s.path_boost("flag_mutex.go") > 1.0
        assert "flag_mutex.go" in s.files
        assert s.path_boost("flag_bool.go") == 1.0
        # ... nor one word of a longer name.
        assert seeds(w, "fix the mutex-guard build").path_boost("flag_mutex.go") == 1.0
        # ... never a file under examples/ (this weak a hint).
        assert seeds(w, "mutex violations").path_boost("examples/flag_mutex.go") == 1.0
        s = seeds(w, "find flag violations")
        assert s.path_boost("flag_mutex.go") == 1.0 and "flag_mutex.go" not in s.files
        # An everyday word names a file by chance.
        assert seeds(w, "how it parses the values").path_boost("command_parse.go") == 1.0


def test_an_everyday_word_ending_in_s_names_no_file_by_one_word_of_its_stem(tmp_path):
    # Judged as written, not only made singular: `status`, `classes` fold to `statu`, `classe`,
    # which are in no list of everyday or request words.
    files = {f"{stem}.go": f"package web\n\nfunc {stem.title().replace('_', '')}() {{}}\n"
             for stem in ("http_status", "css_classes", "apply_fixes", "router")}
    with indexed_workspace(tmp_path / "web", files) as w:
        assert seeds(w, "return the right status for redirects").path_boost("http_status.go") == 1.0
        assert seeds(w, "the router drops classes on the button").path_boost("css_classes.go") == 1.0
        assert seeds(w, "fixes a crash in the router").path_boost("apply_fixes.go") == 1.0


def test_a_plural_names_the_file_of_its_singular(tmp_path):
    files = {"src/worker.ts": "export function spawnWorker(url: string) {\n  return url\n}\n",
             "src/client.ts": "export function connect(url: string) {\n  return url\n}\n"}
    with indexed_workspace(tmp_path / "lib", files) as w:
        s = seeds(w, "keep the search params of workers")
        assert s.path_boost("src/worker.ts") > 1.0 and "src/worker.ts" in s.files
        assert s.path_boost("src/client.ts") == 1.0
        # ... and a prose dash does not glue it to the next word.
        assert seeds(w, "keep the search params of workers--they lose them").path_boost("src/worker.ts") > 1.0


def test_a_singular_names_the_module_named_for_its_plural(tmp_path):
    # A module of many validators is named for all of them; a question speaks of one.
    files = {"pkg/validators.py": "def optional(v):\n    return v\n\n\ndef in_(o):\n    return o\n",
             "pkg/converters.py": "def optional(c):\n    return c\n",
             "pkg/types.py": "def coerce(t):\n    return t\n"}
    with indexed_workspace(tmp_path / "lib", files) as w:
        s = seeds(w, "Fix `optional` validator to accept tuples")
        assert s.path_boost("pkg/validators.py") > 1.0 and "pkg/validators.py" in s.files
        assert s.path_boost("pkg/converters.py") == 1.0
        # ... weaker than the module's own name written out.
        assert seeds(w, "Fix `optional` in validators").path_boost("pkg/validators.py") > s.path_boost("pkg/validators.py")
        # An everyday word is no kind a module is named for: "type hints" are about typing.
        assert seeds(w, "improve the type hints of coerce").path_boost("pkg/types.py") == 1.0


def test_a_verb_s_s_form_is_no_plural_naming_a_file(tmp_path):
    # A command-per-file project: "get", "update" are request words, so "gets", "updates" name no
    # `get.go`, `update.go` either.
    files = {f"cmd/{c}.go": f"package cmd\n\nfunc {c.title()}Cmd() {{}}\n" for c in ("get", "update", "list", "token")}
    with indexed_workspace(tmp_path / "cli", files) as w:
        for q, path in (("the client gets a stale token", "cmd/get.go"),
                        ("the client updates the token", "cmd/update.go"),
                        ("it lists the token", "cmd/list.go")):
            assert seeds(w, q).path_boost(path) == 1.0, q


def test_a_name_shared_with_examples_names_the_project_s_own_file(tmp_path):
    # A library's `worker.ts` and the worker.js of each of its example apps: the question means the
    # library's, unless it says it is about the examples.
    files = {"src/worker.ts": "export function spawnWorker(url: string) {\n  return url\n}\n"}
    for app in ("alias", "legacy", "wasm", "ssr"):
        files[f"playground/{app}/worker.js"] = "export function run() {\n  return 1\n}\n"
        files[f"examples/{app}/worker.js"] = "export function run() {\n  return 2\n}\n"
    with indexed_workspace(tmp_path / "lib", files) as w:
        s = seeds(w, "keep the search params of the worker")
        assert "src/worker.ts" in s.files and not any(p.startswith(("playground/", "examples/")) for p in s.files)
        assert s.path_boost("examples/wasm/worker.js") == 1.0 and s.path_boost("playground/wasm/worker.js") == 1.0
        assert "examples/wasm/worker.js" in seeds(w, "the worker of the example app").files


def test_a_plural_inside_a_snake_case_name_names_no_file(tmp_path):
    files = {"src/traceback.py": "def render(tb):\n    return tb\n", "src/logging.py": "def log(x):\n    return x\n"}
    with indexed_workspace(tmp_path / "lib", files) as w:
        assert seeds(w, "fix tracebacks_code_width type hint").path_boost("src/traceback.py") == 1.0
        assert seeds(w, "fix width of tracebacks").path_boost("src/traceback.py") > 1.0


def test_a_commit_area_prefix_is_strong_directory_evidence(ws):
    plain = seeds(ws, "rendering of the lock clause on mysql")
    area = seeds(ws, "mysql: rendering of the lock clause")
    assert area.path_boost("pkg/dialects/mysql/compiler.py") > plain.path_boost("pkg/dialects/mysql/compiler.py") > 1.0


def test_a_named_class_too_large_to_show_brings_its_members(tmp_path):
    methods = "\n".join(f"    def op_{i}(self):\n        x = {i}\n        y = x * 2\n        return x + y\n"
                        for i in range(30))
    callers = "\n\n".join(f"def use_{i}():\n    \"\"\"Build a machine and count.\"\"\"\n    return Machine()\n"
                          for i in range(60))
    files = {"machine.py": f"class Machine:\n    \"\"\"A large class.\"\"\"\n\n{methods}",
             "users.py": f"from machine import Machine\n\n\n{callers}"}
    with indexed_workspace(tmp_path / "big", files) as w:
        r = context_query(w, "a bug in `Machine` when counting", max_tokens=1200)
        assert "machine.py::Machine" in r.symbols
        assert sum(1 for s in r.symbols if s.startswith("machine.py::Machine.op_")) >= 15


def test_a_function_word_can_still_name_a_file(tmp_path):
    files = {f"{stem}.rs": f"pub struct {stem.title()};\n" for stem in ("once", "empty", "iter")}
    with indexed_workspace(tmp_path / "streams", files) as w:
        s = seeds(w, "stream: update coop handling for empty and once")
        assert s.path_boost("once.rs") > 1.0 and s.path_boost("empty.rs") > 1.0
        assert s.path_boost("iter.rs") == 1.0


def test_a_prose_word_equal_to_a_name_seeds_it_but_does_not_name_it(tmp_path):
    files = {"rules.py": "def quotes(node):\n    return node\n\n\ndef spacing(node):\n    return node\n"}
    with indexed_workspace(tmp_path / "prose", files) as w:
        prose = seeds(w, "add quotes around the option")
        assert "rules.py::quotes" in prose.symbols
        assert "rules.py::quotes" not in prose.named
        for code in ("add `quotes` around the option", "call quotes() on it", "call rules.quotes on it"):
            assert "rules.py::quotes" in seeds(w, code).named, code


def test_implemented_in_a_question_is_not_the_implements_keyword(tmp_path):
    """"Where is the retry logic implemented" asks where code is, as "how does it work" does: the
    word found every class declared `implements ...` (the search folds both to one stem) and
    crowded the code the question's other words find out of the seeds."""
    files = {"src/box.ts": "export class Box implements Holder {\n  get() { return 1 }\n}\n",
             "src/panel.ts": "export class Panel implements Holder {\n  get() { return 2 }\n}\n",
             "src/holder.ts": "export interface Holder {\n  get(): number\n}\n",
             "src/retryer.ts": "export function retryWithBackoff(attempt: number) {\n"
                               "  return Math.min(1000 * 2 ** attempt, 30000)\n}\n"}
    with indexed_workspace(tmp_path / "impl", files) as w:
        s = seeds(w, "where is the retry logic implemented")
        assert s.lexical[:1] == ["src/retryer.ts::retryWithBackoff"], s.lexical
        assert not any(n.startswith(("src/box.ts", "src/panel.ts")) for n in s.lexical), s.lexical


@pytest.mark.parametrize("query, path", [
    ("fix: formatting of rules.d.ts", "types/rules.d.ts"),
    ("read the port from vite.config.ts", "vite.config.ts"),
])
def test_a_file_name_with_several_dots_is_a_path(tmp_path, query, path):
    root = tmp_path / "dots"
    files = {"types/rules.d.ts": "export interface Rules {\n  quotes: string;\n}\n",
             "types/rules.ts": "export const rules = 1;\n",
             "vite.config.ts": "export const port = 3000;\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    with Workspace.open(root) as w:
        w.index()
        s = seeds(w, query)
        assert path in s.files
        assert "types/rules.ts" not in s.files


_CRATES = {
    "engine/src/lib.rs": "pub mod runtime;\n",
    "engine/src/runtime.rs": "pub fn spawn() {}\n",
    "engine-util/src/lib.rs": "pub mod codec;\n",
    "engine-util/src/codec.rs": "pub fn decode_frame() {}\n",
    "engine-stream/src/lib.rs": "pub fn next_item() {}\n",
    "packages/runtime-core/src/render.ts": "export function renderNode() {}\n",
    "packages/runtime-dom/src/patch.ts": "export function patchProp() {}\n",
    "packages/fix-helpers/src/index.ts": "export function helper() {}\n",
}


@pytest.mark.parametrize("query, inside, outside", [
    ("util: decode frames larger than the limit", "engine-util/src/codec.rs", "engine-stream/src/lib.rs"),
    ("stream: stop polling after the end", "engine-stream/src/lib.rs", "engine-util/src/codec.rs"),
    ("fix(util): decode frames larger than the limit", "engine-util/src/codec.rs", "engine/src/runtime.rs"),
    ("[util] decode frames larger than the limit", "engine-util/src/codec.rs", "engine/src/runtime.rs"),
    ("core, util: draw nodes twice", "packages/runtime-core/src/render.ts", "packages/runtime-dom/src/patch.ts"),
    ("runtime-core: draw nodes twice", "packages/runtime-core/src/render.ts", "packages/runtime-dom/src/patch.ts"),
    # A brace list names several packages at once, each one whole.
    ("fix(engine-{util,stream}): decode frames", "engine-util/src/codec.rs", "packages/runtime-dom/src/patch.ts"),
    ("fix(engine-{util,stream}): decode frames", "engine-stream/src/lib.rs", "packages/runtime-dom/src/patch.ts"),
    ("test({fix,runtime}-core): draw nodes twice", "packages/runtime-core/src/render.ts",
     "packages/runtime-dom/src/patch.ts"),
])
def test_a_commit_scope_naming_part_of_a_package_raises_the_package(tmp_path, query, inside, outside):
    with indexed_workspace(tmp_path / "ws", _CRATES) as w:
        s = seeds(w, query)
        assert s.path_boost(inside) > 1.0, s.evidence
        assert s.path_boost(outside) == 1.0, s.evidence
        # Evidence for the ranking to spread, not a file forced in.
        assert inside not in s.files


def test_the_scoped_package_s_own_best_matches_seed_the_ranking(tmp_path):
    """A scope says where, the message's everyday words say what there: the project-wide best
    matches of those words (hundreds of client and connection helpers in another package) leave
    the named package's code out of reach unless its own best matches seed the ranking."""
    core = "".join(f"pub fn client_connection_{k}() -> u32 {{\n    // client connection drops early\n    {k}\n}}\n\n"
                   for k in range(300))
    files = {
        "net-core/src/lib.rs": core,
        "net-reflect/src/lib.rs": "pub mod server;\n",
        "net-reflect/src/server.rs": ("pub fn stream_replies(tx: Sender) {\n"
                                      "    tx.send(reply()).expect(\"the client is gone\");\n}\n\n"
                                      "pub fn describe() -> &'static str {\n    \"reflection\"\n}\n"),
        **{f"tool-{k}/src/lib.rs": f"pub fn tool_{k}() {{}}\n" for k in range(10)},
    }
    with indexed_workspace(tmp_path / "ws", files) as w:
        query = "net-reflect: fix panic when the client drops the connection early"
        s = seeds(w, query)
        assert "net-reflect/src/server.rs::stream_replies" in s.fuzzy, s.packages
        assert "net-reflect/src/server.rs" in context_query(w, query, max_tokens=1500).sources
        # Without a scope the same words seed nothing there beyond what the project-wide search finds.
        plain = seeds(w, "fix panic when the client drops the connection early")
        assert not plain.packages


def test_a_commit_type_is_not_a_package_scope(tmp_path):
    with indexed_workspace(tmp_path / "ws", _CRATES) as w:
        assert seeds(w, "fix: render twice").path_boost("packages/fix-helpers/src/index.ts") == 1.0


def test_a_commit_scope_naming_the_first_words_of_a_file_stem(tmp_path):
    files = {f"{stem}.go": f"package shells\n\nfunc {stem.title().replace('_', '')}() {{}}\n"
             for stem in ("bash_completions", "bash_completionsV2", "fish_completions", "command")}
    with indexed_workspace(tmp_path / "shells", files) as w:
        for query in ("fix(bash): unbound variable on empty extension", "perf(bash-v2): loop over the variable"):
            s = seeds(w, query)
            assert s.path_boost("bash_completionsV2.go") > 1.0, query
            assert s.path_boost("fish_completions.go") == 1.0, query
            assert "bash_completionsV2.go" not in s.files, query


def test_a_file_and_line_names_the_definition_holding_it(tmp_path):
    # A location ("pkg/engine.py:LINE:COL", a traceback's File "...", line N) is about the function
    # that line is in: shown whole.
    body = "".join(f"    value = value * {k} + {k}\n" for k in range(12))
    funcs = [f"def step_{i}(value):\n    \"\"\"Step {i}.\"\"\"\n{body}    return value\n" for i in range(40)]
    files = {"pkg/engine.py": "\n\n".join(funcs), "pkg/__init__.py": "", "utils.py": "\n\n".join(funcs)}
    starts = [1 + sum(f.count("\n") + 2 for f in funcs[:i]) for i in range(len(funcs))]
    with indexed_workspace(tmp_path / "trace", files) as w:
        for i in (7, 23, 39):
            line = starts[i] + 5
            r = context_query(w, f'File "/home/me/src/trace/pkg/engine.py", line {line}, in step_x', max_tokens=600)
            assert f"def step_{i}(value):" in r.context and f"pkg/engine.py::step_{i}" in r.symbols, i
            r = context_query(w, f"pkg/engine.py:{line}:12", max_tokens=600)
            assert f"pkg/engine.py::step_{i}" in r.full_symbols, i
        # A frame in another installed package whose path only ends like a project file, or an
        # absolute path that only shares a file name, is not the project's file.
        for frame in ('File "/usr/lib/python3.11/site-packages/other/pkg/engine.py", line {}, in x',
                      'File "/usr/lib/python3.11/utils.py", line {}, in x',
                      'File "/opt/other/utils.py", line {}, in x'):
            s = seeds(w, frame.format(starts[7] + 5))
            assert not s.named, frame
        # The project's own package installed (a bug report's traceback of a library) is its file.
        for frame in ('File "/usr/lib/python3.11/site-packages/pkg/engine.py", line {}, in x',
                      'File "/usr/local/lib/python3/dist-packages/pkg/engine.py", line {}, in x',
                      'File "C:/Python311/Lib/site-packages/pkg/engine.py", line {}, in x'):
            assert seeds(w, frame.format(starts[7] + 5)).named == {"pkg/engine.py::step_7"}, frame


def test_a_qualified_name_brings_its_dependencies_not_its_words_namesakes(tmp_path):
    """`Router.find` picks one definition; searching "router" and "find" again as text would
    seed every method named after them, and the named method's helpers would lose their place."""
    namesakes = "".join(f"    def find_router_{k}(self):\n        return self.routes[{k}]\n\n" for k in range(40))
    source = ("class Router:\n    def __init__(self):\n        self.routes = []\n\n"
              "    def find(self, path):\n        parts = split_path(path)\n        return match_next(self.routes, parts)\n\n"
              + namesakes +
              "def split_path(path):\n    return [p for p in path.split('/') if p]\n\n\n"
              "def match_next(routes, parts):\n    for route in routes:\n        if route.parts == parts:\n"
              "            return route\n    return None\n")
    with indexed_workspace(tmp_path / "ws", {"router.py": source}) as w:
        s = seeds(w, "Router.find")
        assert s.named == {"router.py::Router.find"}
        assert not any("find_router" in node for node in s.fuzzy), sorted(s.fuzzy)[:5]
        text = context_query(w, "Router.find", max_tokens=300).context
        assert "def split_path(path):" in text and "def match_next(routes, parts):" in text


def test_a_traceback_s_own_lines_name_no_file(tmp_path):
    """'Traceback (most recent call last):' is the traceback's header, not a word about the
    project's traceback.py: the frames it lists are what it points at."""
    body = "".join(f"    line = line.replace('{k}', '') \n" for k in range(8))
    files = {"pkg/traceback.py": "class Traceback:\n    def render(self):\n        return 'frames'\n",
             "pkg/segment.py": "def split_cells(line):\n" + body + "    return line\n",
             "pkg/__init__.py": ""}
    trace = ('Traceback (most recent call last):\n  File "/home/me/proj/pkg/segment.py", line 3, in split_cells\n'
             "    line = line.replace('1', '')\nAttributeError: 'int' object has no attribute 'replace'\n")
    with indexed_workspace(tmp_path / "ws", files) as w:
        s = seeds(w, trace)
        assert s.path_boost("pkg/traceback.py") == 1.0, s.evidence
        assert context_query(w, trace, max_tokens=400).sources == ["pkg/segment.py"]


def test_a_named_interface_method_names_the_methods_that_carry_it_out(tmp_path):
    # Go satisfies an interface by method names alone: no edge leads from the declaration to the
    # code a change to the declared behaviour edits.
    enc = "package enc\n\ntype Encoder interface {\n\tEncodeEntry(e Entry) ([]byte, error)\n\tClone() Encoder\n}\n"
    impl = ("package enc\n\ntype {t} struct{{}}\n\nfunc (e *{t}) EncodeEntry(x Entry) ([]byte, error) {{\n"
            "\treturn nil, nil\n}}\n\nfunc (e *{t}) Clone() Encoder {{\n\treturn e\n}}\n")
    files = {"enc/encoder.go": enc, "enc/json.go": impl.format(t="jsonEncoder"),
             "enc/console.go": impl.format(t="consoleEncoder"), "enc/entry.go": "package enc\n\ntype Entry struct{}\n"}
    with indexed_workspace(tmp_path / "enc", files) as w:
        s = seeds(w, "Ignore a nil time in `Encoder.EncodeEntry`")
        assert {"enc/encoder.go::Encoder.EncodeEntry", "enc/json.go::jsonEncoder.EncodeEntry",
                "enc/console.go::consoleEncoder.EncodeEntry"} <= s.named
        # A concrete type's method names itself only.
        s = seeds(w, "Ignore a nil time in `jsonEncoder.EncodeEntry`")
        assert "enc/console.go::consoleEncoder.EncodeEntry" not in s.named


def test_a_named_trait_method_names_its_impls(tmp_path):
    files = {"src/lib.rs": "pub mod codec;\npub mod text;\n",
             "src/codec.rs": "pub trait Codec {\n    fn decode(&self, b: &[u8]) -> String;\n}\n",
             "src/text.rs": ("use crate::codec::Codec;\n\npub struct Utf8;\n\nimpl Codec for Utf8 {\n"
                             "    fn decode(&self, b: &[u8]) -> String {\n        String::new()\n    }\n}\n"),
             # a method of the same name that implements nothing
             "src/base64.rs": ("pub struct Base64;\n\nimpl Base64 {\n"
                               "    pub fn decode(&self, b: &[u8]) -> Vec<u8> {\n        Vec::new()\n    }\n}\n")}
    with indexed_workspace(tmp_path / "codec", files) as w:
        named = seeds(w, "Reject bad input in `Codec::decode`").named
        assert "src/text.rs::Utf8.decode" in named
        assert "src/base64.rs::Base64.decode" not in named  # the impl says which types implement it


def test_a_path_boost_follows_evidence_added_after_it_was_asked_for():
    """Path boosts are remembered per file for a question; evidence added later (a folder, then the
    file itself) still counts."""
    seeds = Seeds()
    assert seeds.path_boost("pkg/sub/mod.py") == 1.0
    seeds.add_evidence("pkg/", 0.5)
    assert seeds.path_boost("pkg/sub/mod.py") == 1.5
    seeds.add_evidence("pkg/sub/mod.py", 2.0)
    assert seeds.path_boost("pkg/sub/mod.py") == 3.0
    seeds.add_evidence("pkg/sub/", 1.0)  # weaker than the file's own: no change
    assert seeds.path_boost("pkg/sub/mod.py") == 3.0 and seeds.path_boost("pkg/sub/other.py") == 2.0


def test_the_best_scored_pool_is_the_sorted_filtered_top():
    """The pool of best-scored nodes equals sorting every score (ties in the push's order) and
    keeping the first ``n`` that pass the filter, however far down the filter has to go."""
    scores = {f"m{k % 7}.py::f{k}": float(k % 13) for k in range(400)}
    for n, keep in ((10, lambda node: True), (25, lambda node: node.startswith("m3")),
                    (50, lambda node: node.endswith("7")), (500, lambda node: True)):
        expected = [kv for kv in sorted(scores.items(), key=lambda kv: kv[1], reverse=True) if keep(kv[0])][:n]
        assert _best_symbols(scores, n, keep) == expected


@pytest.mark.parametrize("shape", ["a-", "a.", "a/", "a_", "A", "1.", "a@", " "])
def test_a_long_run_of_one_shape_is_read_in_one_pass(ws, shape):
    """A question of 20,000 characters (the limit) made of one repeated shape: the paths, names,
    trailers and hashes in it are looked for in one pass.  Patterns tried again from every
    position of such a run took time cubic in its length (800 characters of "a-a-..." took 18 s,
    20,000 would have taken days); the alarm only stops a test that would never end."""
    import signal

    def never_ending(signum, frame):
        raise TimeoutError("reading the question did not end")

    question = (shape * 20_000)[:19_999] + "?"
    previous = signal.signal(signal.SIGALRM, never_ending)
    signal.alarm(120)
    try:
        seeds(ws, question)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_name_in_many_packages_is_named_in_the_package_the_scope_names(tmp_path):
    # One hook per framework's package of a monorepo: `useItems` written in a message scoped to
    # one package names that package's definition (shown first, whole), not all four alike --
    # and without a scope none of them is singled out.
    body = "".join(f"  const v{k} = items.map((x) => x * {k})\n" for k in range(30))
    files = {f"packages/{fw}-items/src/useItems.ts":
             f"export function useItems(items: number[]): number[] {{\n{body}  return items\n}}\n"
             for fw in ("react", "preact", "solid", "vue")}
    files["packages/items-core/src/store.ts"] = "export class Store {\n  size(): number {\n    return 0\n  }\n}\n"
    with indexed_workspace(tmp_path / "ws", files) as w:
        query = "fix(react-items): keep unsubscribed `useItems` idle"
        assert seeds(w, query).named == {"packages/react-items/src/useItems.ts::useItems"}
        assert "packages/react-items/src/useItems.ts::useItems" in context_query(w, query, max_tokens=1200).full_symbols
        assert not seeds(w, "fix: keep unsubscribed `useItems` idle").named


def _workspace_with_a_large_crate() -> dict[str, str]:
    # A workspace whose protocol crate holds over a quarter of its files, beside its test-helper
    # crate (`shop-http-test`) and a directory of the same word inside another crate.
    files = {f"shop-http/src/h1/part_{k}.rs": f"pub fn part_{k}() -> u32 {{ {k} }}\n" for k in range(12)}
    files["shop-http/src/lib.rs"] = "pub mod h1;\n"
    files["shop-http-test/src/lib.rs"] = "pub fn serve_for_tests() {}\n"
    files["shop-web/src/http/header.rs"] = "pub fn header_value() {}\n"
    files.update({f"shop-web/src/mod_{k}.rs": f"pub fn web_{k}() {{}}\n" for k in range(10)})
    files.update({f"shop-files/src/file_{k}.rs": f"pub fn serve_file_{k}() {{}}\n" for k in range(10)})
    return files


@pytest.mark.parametrize("query", ["fix(http): linger after early responses",
                                   "shop-http: linger after early responses"])
def test_a_scope_naming_a_large_crate_raises_it_and_not_its_helpers(tmp_path, query):
    """A crate holding a large share of a workspace is still where a scope naming it points
    (before, over a quarter of the files it was dropped as saying nothing); of the crates the
    word is part of, the one whose name ends with it is the scope's own, not `shop-http-test`."""
    with indexed_workspace(tmp_path / "ws", _workspace_with_a_large_crate()) as w:
        assert w.graph.files() and sum(p.startswith("shop-http/") for p in w.graph.files()) > len(w.graph.files()) / 4
        s = seeds(w, query)
        assert s.path_boost("shop-http/src/h1/part_3.rs") > 1.0, s.evidence
        assert s.path_boost("shop-http-test/src/lib.rs") == 1.0, s.evidence
        assert s.packages == ["shop-http/"]


def test_a_rust_scope_naming_a_module_of_several_files_seeds_none_of_them(tmp_path):
    """`io: ...` in a Rust workspace is about the io module tree, not about every file that is
    a module called `io` (a test crate's helpers, a metrics submodule): those get the scope's
    evidence but are not forced in as seeds.  A module name only one file has is still that
    file, and a scope naming several files of another language still seeds them."""
    files = {
        "rt/src/io/mem.rs": "pub struct SimplexStream;\nimpl SimplexStream {\n    pub fn poll_write_internal() {}\n}\n",
        "rt/src/io/mod.rs": "pub mod mem;\n",
        "rt/src/metrics/io.rs": "pub struct IoMetrics;\n",
        "rt-test/src/io.rs": "pub struct Mock;\n",
        "rt/src/headers.rs": "pub fn connection_close() {}\n",
        "web/cli.py": "def main():\n    return 1\n",
        "server/cli.py": "def run():\n    return 2\n",
    }
    with indexed_workspace(tmp_path / "ws", files) as w:
        s = seeds(w, "io: complete zero-length memory stream operations")
        assert "rt/src/metrics/io.rs" not in s.files and "rt-test/src/io.rs" not in s.files, s.files
        assert s.path_boost("rt-test/src/io.rs") > 1.0
        assert "rt/src/headers.rs" in seeds(w, "fix(headers): detect connection close").files
        both = seeds(w, "fix(cli): exit with the command's status").files
        assert "web/cli.py" in both and "server/cli.py" in both


_FIXERS = {
    "src/rules/order.ts": """\
        export function fix(fixer: Fixer, node: Node): Edit {
          return fixer.replace(node, sorted(node))
        }

        export function test(value: string): boolean {
          return value.length > 0
        }
        """,
    "src/client.ts": """\
        export function retry(attempts: number): number {
          return attempts + 1
        }
        """,
}


@pytest.mark.parametrize("query", [
    # A squash-merged pull request's message lists its commits, each with its type and scope.
    "Add retries to the client (#12) * feat(client): add retries * fix(client): keep the timeout "
    "* test(client): cover retries",
    "Add retries to the client\n\n- fix(client)!: keep the timeout\n- test(client): cover retries\n",
])
def test_a_commit_type_and_scope_in_the_body_names_no_function(tmp_path, query):
    with indexed_workspace(tmp_path / "ws", _FIXERS) as w:
        named = seeds(w, query).named
        assert "src/rules/order.ts::fix" not in named
        assert "src/rules/order.ts::test" not in named
        # Written as a call in prose (or quoted), the same names are still named.
        called = seeds(w, "make fix(fixer, node) keep comments and `test(value): boolean` trim").named
        assert {"src/rules/order.ts::fix", "src/rules/order.ts::test"} <= called
