"""What a long-running process keeps between questions: file texts (and
their imports) under the index's code generation, and whole-file token
counts worked out in the background.  None of it may ever show stale code."""

from __future__ import annotations

import contextlib

import pytest

from memstrata.compressor import context_query, count_tokens, file_counts
from memstrata.compressor.file_counts import count_missing
from memstrata.compressor.tokens import exact_parts
from memstrata.indexer.workspace import Workspace
from memstrata.storage import Store
from memstrata.storage import code_index as ci


def test_an_edit_is_shown_at_once_though_the_old_text_was_kept(project_copy):
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        before = context_query(ws, "AuthService.login and its callers", max_tokens=2000)
        assert "constant_time_eq(hash_password(password), stored)" in before.context
        again = context_query(ws, "AuthService.login and its callers", max_tokens=2000)
        assert again.context == before.context  # answered from the kept texts
        service = root / "app" / "auth" / "service.py"
        service.write_text(service.read_text().replace(
            "constant_time_eq(hash_password(password), stored)",
            "constant_time_eq(hash_password(password, pepper=PEPPER), stored)"))
        ws.index()
        after = context_query(ws, "AuthService.login and its callers", max_tokens=2000)
        assert "hash_password(password, pepper=PEPPER)" in after.context
        assert "constant_time_eq(hash_password(password), stored)" not in after.context


def test_a_write_by_another_process_is_shown_too(project_copy):
    root = project_copy("python_project")
    with Workspace.open(root) as writer:
        writer.index()
    reader = Workspace(root, Store(root / ".memstrata" / "index.db", readonly=True))
    try:
        assert "def login" in context_query(reader, "AuthService.login", max_tokens=2000).context
        service = root / "app" / "auth" / "service.py"
        service.write_text(service.read_text().replace("def login(", "def sign_in("))
        with Workspace.open(root) as writer:
            writer.index()
        shown = context_query(reader, "AuthService.sign_in", max_tokens=2000).context
        assert "def sign_in(" in shown and "def login(" not in shown
    finally:
        reader.close()



def test_a_file_dropped_and_indexed_again_by_another_process_is_found_again(project_copy, tmp_path):
    """Dropping a file and indexing it again leaves its bytes as they were but
    writes its rows anew (new symbol ids, which full-text hits are read by): a
    reader that saw neither write must still find its definitions, as a fresh
    process does (a daemon kept answering without them until restarted)."""
    root = project_copy("python_project")
    with Workspace.open(root) as writer:
        writer.index()
    reader = Workspace(root, Store(root / ".memstrata" / "index.db", readonly=True))
    try:
        question = "verify the stored password hash on login"
        before = context_query(reader, question, max_tokens=2000)
        assert "app/auth/service.py" in before.sources
        service = root / "app" / "auth" / "service.py"
        kept = service.read_bytes()
        service.unlink()
        with Workspace.open(root) as writer:
            writer.index()
            # Another file is indexed between the two runs: symbol ids then move on
            # rather than come back to the same numbers.
            (root / "app" / "extra.py").write_text("def unrelated_helper():\n    return 1\n")
            writer.index()
        service.write_bytes(kept)
        with Workspace.open(root) as writer:
            writer.index()
        after = context_query(reader, question, max_tokens=2000)
        with Workspace.open(root) as fresh:
            expected = context_query(fresh, question, max_tokens=2000)
        assert after.api_fields() == expected.api_fields()
        assert "app/auth/service.py" in after.sources
    finally:
        reader.close()

@contextlib.contextmanager
def _uncounted(project_copy):
    """An indexed fixture project whose files have no token counts yet, and how many files it has."""
    with Workspace.open(project_copy("python_project")) as ws:
        ws.index()
        with ws.store.write() as conn:
            conn.execute("UPDATE files SET tokens = NULL")
        yield ws, ws.store.execute("SELECT count(*) FROM files")[0][0]


def test_missing_file_counts_are_saved_exact(project_copy):
    with _uncounted(project_copy) as (ws, n_files):
        assert count_missing(ws) == n_files
        rows = ws.store.execute("SELECT f.path, f.tokens, t.text FROM files f JOIN file_text t ON t.file_id = f.id")
        assert rows and all(tokens == count_tokens(text) for _, tokens, text in rows)
        assert count_missing(ws) == 0  # nothing left to do
        assert ci.uncounted_files(ws.store) == []


@pytest.mark.parametrize("batch", [32, 2])
def test_counting_gives_way_before_every_file(project_copy, monkeypatch, batch):
    monkeypatch.setattr(file_counts, "BATCH", batch)
    with _uncounted(project_copy) as (ws, n_files):
        events = []
        read = ci.file_texts_counted
        monkeypatch.setattr(ci, "file_texts_counted", lambda *a: (events.append("read"), read(*a))[1])
        count = file_counts.file_tokens
        monkeypatch.setattr(file_counts, "file_tokens", lambda *a: (events.append("count"), count(*a))[1])
        assert count_missing(ws, pause=lambda: events.append("pause")) == n_files
        # One pause before each file (the batch's first is the batch's own, made before its
        # texts are read), and one more before the look that finds nothing left: a server's
        # requests never wait a batch out.
        assert n_files > 2 and events.count("pause") == n_files + 1
        assert events.count("read") == -(-n_files // batch)
        assert events.count("count") == n_files
        # Between two files' counts, or a count and the next batch's reading, there is a pause.
        assert all(events[i - 1] == "pause" for i, e in enumerate(events) if e == "read")
        assert all(events[i - 1] in ("pause", "read") for i, e in enumerate(events) if e == "count")


def test_counts_made_in_steps_are_the_whole_counts_and_give_way_between_steps(project_copy):
    with _uncounted(project_copy) as (ws, n_files):
        texts = {p: t for p, t in ws.store.execute(
            "SELECT f.path, t.text FROM files f JOIN file_text t ON t.file_id = f.id")}
        step = 200
        pauses = []
        assert count_missing(ws, pause=lambda: pauses.append(1), step_chars=step) == n_files
        rows = ws.store.execute("SELECT path, tokens FROM files")
        assert all(tokens == count_tokens(texts[p]) for p, tokens in rows)
        # Besides the pause before each file, one before each further part of a longer one: a
        # question that comes meanwhile waits for a few milliseconds of counting, not a file's.
        parts = sum(len(exact_parts(t, step)) - 1 for t in texts.values())
        assert parts > 0 and len(pauses) == n_files + 1 + parts


def test_counting_starts_with_the_largest_of_the_files_questions_draw_on(project_copy):
    with _uncounted(project_copy) as (ws, n_files):
        with ws.store.write() as conn:
            conn.execute("UPDATE files SET tokens = 1 WHERE path = 'app/auth/service.py'")
        facts = {p: (bool(t), size) for p, t, size in ws.store.execute("SELECT path, is_test, size FROM files")}
        order = [p for p, _ in ci.uncounted_files(ws.store)]
        assert len(order) == n_files - 1 and "app/auth/service.py" not in order
        assert any(facts[p][0] for p in order) and not all(facts[p][0] for p in order)
        assert order == sorted(order, key=lambda p: (facts[p][0], -facts[p][1], p))


def test_counting_leaves_a_read_only_index_alone(project_copy):
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        with ws.store.write() as conn:
            conn.execute("UPDATE files SET tokens = NULL")
    reader = Workspace(root, Store(root / ".memstrata" / "index.db", readonly=True))
    try:
        assert count_missing(reader) == 0
        assert reader.store.execute("SELECT count(*) FROM files WHERE tokens IS NOT NULL")[0][0] == 0
    finally:
        reader.close()


def test_a_symbols_prior_is_worked_out_again_once_the_graph_changes(tmp_path):
    """The ranking's priors (a constant counts half) are kept per version of the graph: a name
    that was a constant and is now a function is ranked as a function at once."""
    from memstrata.compressor import slice as sl
    from tests.conftest import indexed_workspace

    ws = indexed_workspace(tmp_path, {"pkg/limits.py": "RETRY_BUDGET = 3\n\n\ndef fetch(url):\n    return url\n"})
    try:
        graph = ws.graph
        node = "pkg/limits.py::RETRY_BUDGET"
        assert sl.rank_candidates(ws, graph, "fetch the url", False) is not None
        kept = sl._priors_of(graph)
        assert sl._priors_of(graph) is kept
        kept[node] = sl._prior(graph, node)
        assert kept[node] == 0.5
        (tmp_path / "pkg" / "limits.py").write_text("def RETRY_BUDGET():\n    return 3\n\n\ndef fetch(url):\n    return url\n")
        ws.index()
        graph = ws.graph
        assert node not in sl._priors_of(graph)
        assert sl._prior(graph, node) == 1.0
    finally:
        ws.close()
