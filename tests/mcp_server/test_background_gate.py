"""A server's background work gives way to questions (mcp_server/quiet.py).

Real threads, a real workspace and a real graph build: the build is run
with the gate's pause between its steps and must give the same graph as a
build without one.
"""

import gc
import threading

from memstrata.compressor import context_query
from memstrata.indexer.graph import CodeGraph
from memstrata.indexer.graph_snapshot import SnapshotGraph
from memstrata.indexer.workspace import Workspace
from memstrata.mcp_server import build_server
from memstrata.mcp_server.quiet import QuestionGate


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
    gate.wait_quiet()  # nothing runs: returns at once


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


def test_a_graph_built_with_pauses_equals_one_built_without(python_ws):
    calls = []
    plain = CodeGraph.load(python_ws.store)
    paused = CodeGraph.load(python_ws.store, pause=lambda: calls.append(1))
    assert len(calls) >= 5  # between the row loads, each part of adding the files and the resolution steps
    assert sorted(plain.g.nodes(data=True)) == sorted(paused.g.nodes(data=True))
    assert sorted(plain.g.edges(keys=True, data=True)) == sorted(paused.g.edges(keys=True, data=True))
    assert plain._ref_edges == paused._ref_edges
    assert plain.take_resolved_targets() == paused.take_resolved_targets()


def test_a_watching_server_builds_the_full_graph_through_its_gate(project_copy, wait_until):
    """The snapshot answers first; the full graph built behind it, paused
    between steps by the server's gate, then answers byte for byte the same."""
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
