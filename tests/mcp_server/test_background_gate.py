"""A server's background work gives way to questions (mcp_server/quiet.py).

Real threads, a real workspace and a real graph build: the build is run
with the gate's pause between its steps and must give the same graph as a
build without one.
"""

import gc
import sys
import threading
import time

import pytest

from memstrata.compressor import context_query
from memstrata.indexer import graph as graph_module
from memstrata.indexer.graph import CodeGraph
from memstrata.indexer.graph_snapshot import SnapshotGraph
from memstrata.indexer.workspace import Workspace
from memstrata.mcp_server import build_server
from memstrata.mcp_server import quiet
from memstrata.mcp_server.quiet import QuestionGate
from memstrata.storage import code_index


def test_the_gate_holds_background_work_while_a_question_is_answered():
    gate = QuestionGate(max_wait=60)
    inside, leave, resumed = threading.Event(), threading.Event(), threading.Event()

    def question():
        with gate.answering():
            inside.set()
            leave.wait(30)

    def background():
        inside.wait(30)
        gate.wait_quiet()
        resumed.set()

    threads = [threading.Thread(target=question), threading.Thread(target=background)]
    for t in threads:
        t.start()
    assert inside.wait(30)
    assert not resumed.wait(0.3)  # the question still runs: the background step waits
    leave.set()
    assert resumed.wait(30)
    for t in threads:
        t.join(30)


def test_a_gate_no_question_came_through_lets_work_run_at_once():
    gate = QuestionGate(max_wait=60, quiet=30)
    started = time.monotonic()
    gate.wait_quiet()
    assert time.monotonic() - started < 10


def test_short_steps_outside_the_interpreter_lock_wait_only_while_a_question_is_answered():
    """The token counts' steps (encoding, which lets go of the lock) run in the moments between
    questions, however short: a client asking back to back never leaves a silence."""
    gate = QuestionGate(max_wait=60, quiet=30)
    with gate.answering():
        pass
    started = time.monotonic()
    gate.wait_unanswered()
    assert time.monotonic() - started < 10  # no wait for the 30 s of silence wait_quiet wants
    inside, leave, resumed = threading.Event(), threading.Event(), threading.Event()

    def question():
        with gate.answering():
            inside.set()
            leave.wait(30)

    asker = threading.Thread(target=question)
    asker.start()
    assert inside.wait(30)
    worker = threading.Thread(target=lambda: (gate.wait_unanswered(), resumed.set()))
    worker.start()
    assert not resumed.wait(0.3)  # a question is being answered: the step waits
    leave.set()
    assert resumed.wait(30)
    for t in (asker, worker):
        t.join(30)


def test_background_work_waits_for_a_moment_of_silence_after_an_answer():
    """An agent asks its next question right after an answer: a step started in between would
    share the interpreter with it.  Work resumes once no question has come for ``quiet`` seconds."""
    gate = QuestionGate(max_wait=60, quiet=0.4)
    with gate.answering():
        pass
    ended = time.monotonic()
    gate.wait_quiet()
    assert time.monotonic() - ended >= 0.4
    # A question that comes during the silence starts it again.
    gate = QuestionGate(max_wait=60, quiet=2.0)
    with gate.answering():
        pass
    resumed = threading.Event()
    worker = threading.Thread(target=lambda: (gate.wait_quiet(), resumed.set()))
    worker.start()
    assert not resumed.wait(0.3)
    with gate.answering():
        asked = time.monotonic()
    assert resumed.wait(30)
    assert time.monotonic() - asked >= 1.9
    worker.join(30)


def test_a_steady_stream_of_questions_slows_background_work_but_never_stops_it():
    gate = QuestionGate(max_wait=0.05)
    with gate.answering():
        gate.wait_quiet()  # returns after max_wait although the question never ends


def test_settling_freezes_what_the_background_work_keeps():
    gate = QuestionGate()
    kept = [[i] for i in range(1000)]
    before = gc.get_freeze_count()
    try:
        gate.wait_quiet_and_settle()
        assert gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()


class _Node:
    pass


def test_the_last_answer_to_end_settles_what_the_questions_kept():
    """What a question keeps (caches) is frozen when the last answer ends, and the cyclic garbage it
    left is collected first, not frozen with it."""
    import weakref

    gate = QuestionGate()
    try:
        with gate.answering():
            kept = [[i] for i in range(1000)]
            a, b = _Node(), _Node()
            a.other, b.other = b, a           # a cycle, garbage once the names go
            gone = weakref.ref(a)
            del a, b
            with gate.answering():             # a second question at the same time: nothing settles yet
                pass
            frozen = gc.get_freeze_count()
        assert gc.get_freeze_count() >= frozen + len(kept)
        assert gone() is None
    finally:
        gc.unfreeze()


def test_a_graph_built_with_pauses_equals_one_built_without(python_ws, monkeypatch):
    # Steps of no length and pages of two rows, so that every place a build pauses at is reached
    # on a small project: between pages of rows, between rows of each part of adding the files,
    # between one file's references, while the rows are freed.
    monkeypatch.setattr(code_index, "GRAPH_PAGE_ROWS", 2)
    monkeypatch.setattr(graph_module, "STEP_S", 0.0)
    where = []

    def pause():
        caller = sys._getframe(2)  # the caller of the pacing wrapper
        where.append(caller.f_code.co_name)

    plain = CodeGraph.load(python_ws.store)
    paused = CodeGraph.load(python_ws.store, pause=pause)
    assert {"_pages", "_paced", "_resolve_files", "load"} <= set(where)
    assert len(where) > len(python_ws.store.execute("SELECT id FROM refs"))
    assert plain.generation == paused.generation
    assert sorted(plain.g.nodes(data=True)) == sorted(paused.g.nodes(data=True))
    assert sorted(plain.g.edges(keys=True, data=True)) == sorted(paused.g.edges(keys=True, data=True))
    assert plain._ref_edges == paused._ref_edges
    assert plain.take_resolved_targets() == paused.take_resolved_targets()


def test_a_watching_server_builds_the_full_graph_through_its_gate(project_copy, wait_until, monkeypatch):
    """The snapshot answers first; the full graph built behind it, paused
    between steps by the server's gate, then answers byte for byte the same."""
    monkeypatch.setattr(graph_module, "STEP_S", 0.0)  # a small project's build is all one step otherwise
    monkeypatch.setattr(quiet, "QUIET_S", 0.0)
    root = project_copy("python_project")
    questions = ["AuthService.login and its callers", "how are passwords hashed and compared", "routes"]
    with Workspace.open(root) as ws:
        ws.index()
        ws.graph
    with Workspace.open(root) as ws:
        assert isinstance(ws.graph, SnapshotGraph)
        before = [context_query(ws, q, max_tokens=1024).api_fields() for q in questions]
        build_server(ws)
        pauses = []
        gated = ws.background_pause
        ws.background_pause = lambda: (pauses.append(1), gated())
        try:
            ws.start_watching()
            wait_until(lambda: ws._standby is not None, message="the full graph built in the background")
            assert len(pauses) >= 5
            ws._take_standby()   # what the first change does
            assert type(ws.graph) is CodeGraph
            assert [context_query(ws, q, max_tokens=1024).api_fields() for q in questions] == before
        finally:
            ws.stop_watching()
            gc.unfreeze()


def test_rows_that_move_between_pages_are_refused(project_copy, monkeypatch):
    """Pages read at different moments are one picture only if nothing was written between them:
    an edit indexed while the build paused makes the build give up (the first change builds the
    graph instead), never a graph of half old, half new rows."""
    monkeypatch.setattr(code_index, "GRAPH_PAGE_ROWS", 2)
    monkeypatch.setattr(graph_module, "STEP_S", 0.0)
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        edited = []

        def pause():
            if not edited and sys._getframe(2).f_code.co_name == "_pages":  # between two pages
                edited.append(1)
                path = root / "app" / "reports.py"
                path.write_text(path.read_text() + "\n\ndef added_while_paused():\n    return 1\n")
                ws.index()

        with pytest.raises(code_index.RowsMoved):
            CodeGraph.load(ws.store, pause=pause)
        assert edited
        # Read again with nothing moving, it is the whole index as it now is.
        assert "app/reports.py::added_while_paused" in CodeGraph.load(ws.store, pause=lambda: None).g


def test_a_server_counts_whole_files_from_the_catch_up_on_through_its_gate(project_copy, wait_until, monkeypatch):
    """A client asks its first questions right after start-up: the counts begin as soon as
    the index is up to date, beside the graph's load, in steps that give way through the
    server's gate while a question is answered."""
    from memstrata.mcp_server import IndexWarmup, warmup as warmup_module

    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        with ws.store.write() as conn:
            conn.execute("UPDATE files SET tokens = NULL")
    seen = {}
    real_start = warmup_module.start_counting

    def start_counting(ws, pause=None, step_chars=None, in_child=False, child=None):
        seen.update(graph_loaded=ws._graph is not None, pause=pause, step_chars=step_chars, in_child=in_child)
        return real_start(ws, pause=pause, step_chars=step_chars, in_child=in_child, child=child)

    monkeypatch.setattr(warmup_module, "start_counting", start_counting)
    with Workspace.open(root) as ws:
        warmup = IndexWarmup(ws, watch=False)
        build_server(ws, warmup=warmup)
        warmup.start()
        assert warmup.wait(60)
        assert seen["graph_loaded"] is False
        # The steps give way through the gate the server set (the counts may start before it is set).
        assert seen["pause"] == warmup._pause and warmup.pause.__func__ is QuestionGate.wait_unanswered
        assert seen["step_chars"] > 0 and seen["in_child"]
        wait_until(lambda: ws.store.execute("SELECT count(*) FROM files WHERE tokens IS NULL")[0][0] == 0,
                   message="every file counted")
        warmup.join(10)
        gc.unfreeze()
