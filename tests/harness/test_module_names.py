"""Which words of a request name a module: its file name without the extension, said as a word."""

from contextlib import contextmanager

import pytest

from memstrata.harness.proxy.project_match import says_module


@pytest.mark.parametrize("question, base", [
    ("fix(config): close bundles when generation fails", "config.ts"),   # a commit scope
    ("feat(css): minify style tags", "css.ts"),
    ("use the new URL form for assets in JS", "asset.ts"),                # the plural of the name
    ("the error raised on a closed stream", "errors.py"),                 # the singular of a plural name
    ("make the no-unused rule skip catch parameters", "no-unused.js"),   # a hyphenated name, whole
    ("The Router matches the wrong route", "router.go"),                  # any case
])
def test_a_word_that_is_the_module_name_names_the_file(question, base):
    assert says_module(question, base)


@pytest.mark.parametrize("question, base", [
    ("fix(query-core): keep observer notifications stable", "query.ts"),  # part of a longer name
    ("exclude the postfix from __VITE_ASSET__", "asset.ts"),              # part of an identifier
    ("resolveConfig drops the root option", "config.ts"),                 # part of a CamelCase name
    ("the main loop spins when idle", "main.py"),                         # a place name, not a topic
    ("index the files in order", "index.ts"),
    ("the vite config is read twice", "vite.config.ts"),                  # a name with a dot left
    ("an io error on close", "io.rs"),                                    # too short to be a topic
    ("the configs are merged twice", "configuration.py"),                 # another word
])
def test_other_words_name_no_file(question, base):
    assert not says_module(question, base)


def test_a_path_as_written_means_that_file_not_every_file_ending_like_it(tmp_path):
    """A read's absolute path is one file, even where a test tree mirrors the source tree
    (tests/lib/rules/x.js beside lib/rules/x.js): the ranking's chances and the file named by its
    module name are asked of that file, where the suffix match left two and answered neither.  A
    written path that is no indexed file's whole path still matches every file it ends."""
    with _matcher(tmp_path, ("lib/rules/no_unused.py", "tests/lib/rules/no_unused.py"),
                  "def create(context):\n    return {'checks': context}\n") as matcher:
        assert matcher.resolve_path(str(tmp_path / "lib/rules/no_unused.py")) == ["lib/rules/no_unused.py"]
        assert matcher.resolve_path("./tests/lib/rules/no_unused.py") == ["tests/lib/rules/no_unused.py"]
        assert sorted(matcher.resolve_path("rules/no_unused.py")) == ["lib/rules/no_unused.py",
                                                                      "tests/lib/rules/no_unused.py"]
        assert matcher.names_file("fix(no_unused): skip catch parameters", str(tmp_path / "lib/rules/no_unused.py"))


def test_a_commit_scope_that_names_a_package_names_its_files(tmp_path):
    """``chore(codegen,http): ...`` says which crates of a workspace the task changes, as a file
    name said as a word says which module: a read of any file of those packages is a likely
    file, also of a package holding a large share of the project's files (two of five here).
    Another package's file, or a request without a scope, names none of them."""
    files = ("shop-http/src/h1/dispatch.rs", "shop-http/src/h1/codec.rs", "shop-codegen/src/route.rs",
             "shop-files/src/named.rs", "shop-web/src/app.rs")
    with _matcher(tmp_path, files, "pub fn run(limit: usize) -> usize {\n    limit + 1\n}\n") as matcher:
        question = "chore(codegen,http): address lint warnings"
        assert matcher.names_file(question, str(tmp_path / "shop-http/src/h1/dispatch.rs"))
        assert matcher.names_file(question, "shop-codegen/src/route.rs")
        assert not matcher.names_file(question, "shop-files/src/named.rs")
        assert not matcher.names_file("address lint warnings in http and codegen", "shop-codegen/src/route.rs")
        assert not matcher.names_file("fix: address lint warnings", "shop-http/src/h1/dispatch.rs")


@contextmanager
def _matcher(root, files, text):
    """A ProjectMatcher over an indexed project of ``files``, each holding ``text``."""
    from memstrata.harness.proxy.project_match import ProjectMatcher
    from memstrata.indexer.workspace import Workspace

    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    ws = Workspace.open(root)
    try:
        ws.index()
        yield ProjectMatcher(ws)
    finally:
        ws.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("filler", ["\n", "public\n", "  static\n"])
def test_a_pasted_text_of_many_blank_or_modifier_lines_is_read_in_time(tmp_path, filler):
    # A tool result of a file that is mostly blank lines (or a hostile one): reading which
    # definitions it names must not cost the square of its length.
    text = "class Router:\n    pass\n" + filler * 200_000 + "    return None\n"
    with _matcher(tmp_path, ["app/router.py"], "class Router:\n    pass\n") as matcher:
        assert matcher.candidate_files(text) == ["app/router.py"]
