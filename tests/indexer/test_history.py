"""What recent history changed, read from a real git repository (indexer/history.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from memstrata.compressor import context_query
from memstrata.indexer import history
from memstrata.indexer.workspace import Workspace

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(root: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_SYSTEM=os.devnull)
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env).stdout


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def lines_of(root: Path, rel: str, needle: str) -> int:
    return next(i for i, ln in enumerate((root / rel).read_text().splitlines(), 1) if needle in ln)


MODULE = """\
    def alpha(x):
        return x + 1


    def beta(x):
        return x * 2


    def gamma(x):
        return x - 3
    """


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "pkg/mod.py", MODULE)
    commit(root, "first")
    return root


def test_ages_follow_the_lines_through_later_commits_and_the_working_tree(repo):
    # Commit 2 (age 2 once two more exist): beta's body.
    text = (repo / "pkg/mod.py").read_text().replace("return x * 2", "return x * 20")
    (repo / "pkg/mod.py").write_text(text)
    commit(repo, "beta")
    # Commit 3 (age 1): three lines inserted at the top move everything down.
    (repo / "pkg/mod.py").write_text("import os\nimport sys\n\n" + (repo / "pkg/mod.py").read_text())
    commit(repo, "imports")
    # Uncommitted (age 0): gamma's body.
    text = (repo / "pkg/mod.py").read_text().replace("return x - 3", "return x - 30")
    (repo / "pkg/mod.py").write_text(text)

    found = history.recent_changes(repo)
    assert found is not None and found.head == git(repo, "rev-parse", "HEAD").strip()
    ranges = found.lines["pkg/mod.py"]
    beta = lines_of(repo, "pkg/mod.py", "return x * 20")
    gamma = lines_of(repo, "pkg/mod.py", "return x - 30")
    alpha = lines_of(repo, "pkg/mod.py", "return x + 1")
    assert found.age_of("pkg/mod.py", beta, beta) == 2  # moved down by three lines, still found
    assert found.age_of("pkg/mod.py", gamma, gamma) == 0
    assert found.age_of("pkg/mod.py", 1, 2) == 1
    # The first commit (age 3) wrote every line; later changes took over only their own.
    assert found.age_of("pkg/mod.py", alpha, alpha) == 3
    assert found.file_age("pkg/mod.py") == 0
    # Sorted, disjoint ranges covering the file.
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))


def test_a_line_changed_again_takes_the_newer_age_and_only_recent_commits_count(repo):
    for i in range(3):
        text = (repo / "pkg/mod.py").read_text()
        (repo / "pkg/mod.py").write_text(text.replace(f"return x * {2 * 10 ** i}", f"return x * {2 * 10 ** (i + 1)}"))
        commit(repo, f"beta {i}")
    found = history.recent_changes(repo, commits=2)
    beta = lines_of(repo, "pkg/mod.py", "return x * 2000")
    assert found.age_of("pkg/mod.py", beta, beta) == 1
    # Two commits read: the first commit's lines are too old to count.
    alpha = lines_of(repo, "pkg/mod.py", "return x + 1")
    assert found.age_of("pkg/mod.py", alpha, alpha) is None


def test_a_deleted_range_and_a_pure_insertion_inside_a_range(repo):
    body = "".join(f"    v{i} = {i}\n" for i in range(10))
    write(repo, "pkg/long.py", "def long():\n" + body + "    return v9\n")
    commit(repo, "long")
    lines = (repo / "pkg/long.py").read_text().splitlines(keepends=True)
    lines.insert(5, "    inserted = True\n")  # inside the range the last commit wrote
    del lines[8:10]
    (repo / "pkg/long.py").write_text("".join(lines))
    commit(repo, "edit")
    found = history.recent_changes(repo)
    inserted = lines_of(repo, "pkg/long.py", "inserted = True")
    ret = lines_of(repo, "pkg/long.py", "return v9")
    assert found.age_of("pkg/long.py", inserted, inserted) == 1
    assert found.age_of("pkg/long.py", ret, ret) == 2
    assert found.age_of("pkg/long.py", 1, 1) == 2


def test_no_history_outside_a_checkout_or_without_git(tmp_path, monkeypatch):
    write(tmp_path, "a.py", "def f():\n    return 1\n")
    assert history.recent_changes(tmp_path) is None
    (tmp_path / "repo").mkdir()
    git(tmp_path / "repo", "init", "-q")
    assert history.recent_changes(tmp_path / "repo") is None  # no commit yet
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert history.head_commit(tmp_path / "repo") is None


def test_added_lines_that_look_like_patch_headers_are_content(repo):
    """An added line "++ x" reads "+++ x" in a patch, a removed "-- x" reads
    "--- x": neither may be taken for a file name."""
    write(repo, "notes.py", "-- old\nkeep = 1\nlast = 2\n")
    commit(repo, "notes")
    write(repo, "notes.py", "++ new\nkeep = 1\nlast = 3\n")  # two hunks, the first one "--- old" / "+++ new"
    commit(repo, "notes again")
    found = history.recent_changes(repo)
    assert set(found.lines) == {"pkg/mod.py", "notes.py"}
    assert [found.age_of("notes.py", n, n) for n in (1, 2, 3)] == [1, 2, 1]


def test_a_git_that_hangs_is_killed_and_gives_no_history(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(history, "GIT_TIMEOUT", 0.5)
    started = time.monotonic()
    assert history.recent_changes(tmp_path) is None
    assert time.monotonic() - started < 30


def test_a_project_inside_a_larger_repository_reads_its_own_folder(tmp_path):
    root = tmp_path / "mono"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "svc/app/main.py", "def main():\n    return 0\n")
    write(root, "other/x.py", "def x():\n    return 0\n")
    commit(root, "both")
    found = history.recent_changes(root / "svc")
    assert set(found.lines) == {"app/main.py"}


def test_the_repositorys_own_configuration_runs_nothing(repo):
    """fsmonitor hooks and external diff or textconv drivers in a cloned
    repository's config would run commands: reading history must not."""
    marker = repo.parent / "ran"
    script = repo.parent / "hook.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    script.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(script))
    git(repo, "config", "diff.external", str(script))
    git(repo, "config", "diff.evil.textconv", str(script))
    (repo / ".gitattributes").write_text("*.py diff=evil\n")
    commit_text = (repo / "pkg/mod.py").read_text().replace("return x + 1", "return x + 10")
    (repo / "pkg/mod.py").write_text(commit_text)
    found = history.recent_changes(repo)
    assert found is not None and found.file_age("pkg/mod.py") == 0
    assert not marker.exists()


def test_the_workspace_keeps_history_beside_the_index_for_every_reader(repo):
    with Workspace.open(repo) as ws:
        ws.index()
        first = ws.history
        assert first is not None and first.file_age("pkg/mod.py") == 1
    text = (repo / "pkg/mod.py").read_text().replace("return x * 2", "return x * 20")
    (repo / "pkg/mod.py").write_text(text)
    with Workspace.open(repo) as writer, Workspace.open(repo) as reader:
        assert reader.history.file_age("pkg/mod.py") == 1
        writer.index()  # the edit: now an uncommitted change
        beta = lines_of(repo, "pkg/mod.py", "return x * 20")
        assert reader.history.age_of("pkg/mod.py", beta, beta) == 0
        commit(repo, "beta")
        writer.index()  # no file changed, but HEAD moved
        assert reader.history.age_of("pkg/mod.py", beta, beta) == 1


def test_a_recent_change_tips_an_ambiguous_question_towards_its_code(tmp_path):
    """Two look-alike handlers, a question that fits both: the one the last
    commit changed is the likelier target, shown whole; before that commit the
    question said nothing to tell them apart."""
    root = tmp_path / "svc"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")

    def handler(name: str, extra: str = "") -> str:
        lines = [f"def {name}(request, retries=3):", '    """Send the request to the upstream and retry on failure."""']
        lines += [f"    attempt_{i} = request.send(timeout={i})  # retry step {i}" for i in range(25)]
        return "\n".join(lines + [f"    return attempt_24{extra}", "", ""])

    for i in range(2):
        write(root, f"svc/client_{i}.py", handler(f"send_with_retry_{i}"))
    commit(root, "clients")
    for i in range(history.RECENT_COMMITS):  # the clients' first commit falls out of the recent window
        write(root, "NOTES.txt", f"note {i}\n")
        commit(root, f"notes {i}")
    question = "sending the request to the upstream fails after a retry"
    with Workspace.open(root) as ws:
        ws.index()
        before = context_query(ws, question, max_tokens=650)
        write(root, "svc/client_1.py", handler("send_with_retry_1", " or None"))
        commit(root, "client 1: give up quietly")
        ws.index()
        after = context_query(ws, question, max_tokens=650)
    # Room for one body: before the commit the ranking's order picks it, after it the change does.
    assert before.full_symbols == ["svc/client_0.py::send_with_retry_0"]
    assert after.full_symbols == ["svc/client_1.py::send_with_retry_1"]
