"""A repository's .gitignore is input like its code: a pattern written to make Python's regular
expressions backtrack must not stop the walk, and every pattern still means what git reads."""

from __future__ import annotations

import pytest

from memstrata.indexer.scan import PathFilter, _gitignore_spec, scan_project

from ..conftest import write_files

MANY_STARS = "*a" * 14 + "b.py"         # a name of many a's almost matches it, in n**14 ways
MANY_DOUBLE_STARS = "d/" + "**/d/" * 6 + "z"  # a deep chain of d/ folders, likewise


@pytest.mark.timeout(120)
def test_patterns_that_would_backtrack_for_ever_are_matched_and_still_honoured(tmp_path):
    deep = "/".join(["d"] * 80)
    root = write_files(tmp_path / "p", {
        ".gitignore": f"{MANY_STARS}\n{MANY_DOUBLE_STARS}\n",
        "a" * 200 + ".py": "def kept():\n    pass\n",
        "x" + "a" * 14 + "b.py": "def ignored():\n    pass\n",
        f"{deep}/kept.py": "def deep():\n    pass\n",
        f"{deep}/z/gone.py": "def gone():\n    pass\n",
    })
    result = scan_project(root)
    assert sorted(c.path for c in result.files) == sorted(["a" * 200 + ".py", f"{deep}/kept.py"])
    ignored = {path for path, reason, _ in result.skipped if reason == "gitignored"}
    assert "x" + "a" * 14 + "b.py" in ignored
    assert f"{deep}/z/" in ignored or f"{deep}/z/gone.py" in ignored
    # the watcher's classifier reads the same patterns
    assert PathFilter(root)._ignored("a" * 200 + ".py", is_dir=False) is False
    assert PathFilter(root)._ignored("x" + "a" * 14 + "b.py", is_dir=False) is True


@pytest.mark.parametrize("pattern, path, ignored", [
    # stars of one segment: the leftmost place of each piece decides
    ("*a*a*b", "xaya.c", False), ("*a*a*b", "aab", True), ("*a*a*b", "ab", False), ("*a*a*b", "x/aaxb", True),
    ("a*b*c", "abcbc", True), ("a*b*c", "abcb", False), ("*.min.*", "app.min.js", True),
    ("a?b*[cd]*e", "axbzzdqe", True), ("a?b*[cd]*e", "axbzzqe", False),
    # a class never matches a slash (git's reading)
    ("*[!a]*[!a][!a]?", "..b/.b.", False), ("x[!a]y", "x/y", False), ("x[!a]y", "xby", True),
    # `**` between segments: whole segments, in order
    ("a/**/b/**/c", "a/x/b/y/c", True), ("a/**/b/**/c", "a/b/c", True), ("a/**/b/**/c", "a/bb/c", False),
    ("a/**/b/**/c", "a/c/b", False), ("a/**/b*x/**/c", "a/q/bzx/c", True), ("a/**/b*x/**/c", "a/q/bzxz/c", False),
])
def test_rewritten_patterns_mean_what_git_reads(pattern, path, ignored):
    assert bool(_gitignore_spec([pattern]).check_file(path).include) is ignored
