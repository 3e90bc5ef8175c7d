"""Work a cold index does once instead of per file or per worker (issue 24): the search
text of a qualified name from cached parts, the bases of a folder's absolute Python
imports, the query passes compiled before the workers fork.  Each gives what the
per-file work gave."""

from __future__ import annotations

import threading

import pytest

from memstrata.indexer import parse, run
from memstrata.indexer.imports import build_resolve_context, resolve_import
from memstrata.indexer.model import ImportFact
from memstrata.indexer.workspace import Workspace
from memstrata.storage.text import expand_identifiers, expand_name

QUALNAMES = [
    "plain", "snake_case_name", "Foo", "FooBar", "Foo.barBaz", "HTTPServer.getX2", "a.b.c",
    "Outer.Inner.fooBar.fooBar", "size:set", "fooBar:2", "this[]", "operator==", "Klass.operator()",
    "éFooBar.fooBär", "A1b.b2C", "x..yZ", "", ".", "getHTTPResponseCode.parseV2Name",
    "Model.Meta", "a b.cD", "URLs.toJSON",
]


@pytest.mark.parametrize("qualname", QUALNAMES)
def test_expand_name_is_the_identifier_expansion_of_the_dotted_name(qualname):
    assert expand_name(qualname) == expand_identifiers(qualname.replace(".", " "))
    assert expand_name(qualname) == expand_name(qualname)  # again, from the cached parts


def test_absolute_python_imports_resolve_per_folder_once(tmp_path):
    files = {
        "pkg/__init__.py": "", "pkg/models.py": "", "pkg/views.py": "", "pkg/helpers.py": "",
        "scripts/run.py": "", "scripts/tool.py": "", "scripts/helpers.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    ctx = build_resolve_context(tmp_path, sorted(files))
    imp = ImportFact(module="helpers", name=None, alias=None, line=1)
    # A script's own folder is searched (no package holds it); a package's is not.
    assert resolve_import("python", imp, "scripts/run.py", ctx) == "scripts/helpers.py"
    assert resolve_import("python", imp, "scripts/tool.py", ctx) == "scripts/helpers.py"
    assert resolve_import("python", imp, "pkg/views.py", ctx) is None
    assert resolve_import("python", ImportFact("pkg.models", None, None, 1), "pkg/views.py", ctx) == "pkg/models.py"
    assert set(ctx.py_bases) == {"scripts", "pkg"}
    assert ctx.py_bases["scripts"] == ("", "scripts") and ctx.py_bases["pkg"] == ("",)


def test_the_parent_compiles_the_query_passes_its_forked_workers_use(tmp_path, monkeypatch):
    if threading.active_count() != 1:
        pytest.skip("another thread runs: the pool forks through a fork server, which inherits nothing")
    for i in range(run._INLINE_BELOW + 2 * run._BATCH_FILES):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}(x):\n    return g(x)\n")
    (tmp_path / "app.js").write_text("function h() { return 1; }\n")
    # The parent parses nothing itself (every file goes to the pool): the passes it holds
    # afterwards are the ones it compiled for its workers, and only those of the run's languages.
    monkeypatch.setattr(parse, "_passes_by_language", {})
    with Workspace.open(tmp_path, workers=2) as ws:
        summary = ws.indexer.index_all()
    assert summary.parsed == run._INLINE_BELOW + 2 * run._BATCH_FILES + 1
    assert set(parse._passes_by_language) == {"python", "javascript"}


def test_warming_an_unknown_language_leaves_the_run_to_meet_it(monkeypatch):
    monkeypatch.setattr(parse, "_passes_by_language", {})
    parse.warm_queries(["python", None, "no-such-language"])
    assert set(parse._passes_by_language) == {"python"}


def test_the_collector_is_paused_while_a_forked_run_writes_and_resumed_after(tmp_path, monkeypatch):
    if threading.active_count() != 1:
        pytest.skip("another thread runs: the run leaves the collector alone")
    import gc

    for i in range(run._INLINE_BELOW + 2 * run._BATCH_FILES):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}(x):\n    return g(x)\n")
    seen = []
    write = run.Indexer._write_outcomes

    def watched(self, *args):
        seen.append(gc.isenabled())
        return write(self, *args)

    monkeypatch.setattr(run.Indexer, "_write_outcomes", watched)
    assert gc.isenabled()
    with Workspace.open(tmp_path, workers=2) as ws:
        summary = ws.indexer.index_all()
    assert summary.parsed == run._INLINE_BELOW + 2 * run._BATCH_FILES
    assert seen and not any(seen)
    assert gc.isenabled()


def test_a_forked_worker_collects_though_its_parent_paused_the_collector():
    import gc
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    from memstrata.indexer.worker import init_worker

    gc.disable()
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"),
                                 initializer=init_worker, initargs=(None, os.getpid())) as pool:
            assert pool.submit(gc.isenabled).result(timeout=60)
    finally:
        gc.enable()


def test_a_pool_that_cannot_start_leaves_the_collector_running(tmp_path, monkeypatch):
    if threading.active_count() != 1:
        pytest.skip("another thread runs: the run leaves the collector alone")
    import gc

    for i in range(run._INLINE_BELOW + 2 * run._BATCH_FILES):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}(x):\n    return g(x)\n")

    def no_pool(*args, **kwargs):
        raise OSError("Resource temporarily unavailable")  # what fork says at a process limit

    monkeypatch.setattr(run, "ProcessPoolExecutor", no_pool)
    with Workspace.open(tmp_path, workers=2) as ws, pytest.raises(OSError) as failed:
        ws.indexer.index_all()
    # Asked while the error (and so the run's frames) is still held, as a caller reporting it does.
    assert failed.value.__traceback__ is not None and gc.isenabled()
