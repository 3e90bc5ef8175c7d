"""branch_diff, branch_preview and branch_merge, held to stratadb 1.2.7 (issue 23).

Scripted histories (merge_scenarios.py) and random ones run through
MemStrata's server and the real engine side by side, compared after masking
ids and times.
"""

from __future__ import annotations

import pytest

from memstrata.strata.mcp import StrataServer

from .differential import differing, in_memory_differences
from .lifecycle_scenarios import random_history_script, random_lifecycle_script
from .merge_scenarios import SCRIPTS, random_merge_script


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_merge_script_matches_the_real_engine(name):
    problems = in_memory_differences(SCRIPTS[name])
    assert not problems, differing(problems)


# Forks of forks, promotions both ways and from several sources into one target.
@pytest.mark.parametrize("seed", range(16))
def test_random_merge_history_matches_the_real_engine(seed):
    problems = in_memory_differences(random_merge_script(seed, 120))
    assert not problems, differing(problems)


# Branches created, forked at versions and times, promoted and deleted while graphs and
# event logs change, read at the head and as of earlier commits and instants.
@pytest.mark.parametrize("seed", range(12))
def test_random_lifecycle_history_matches_the_real_engine(seed):
    problems = in_memory_differences(random_lifecycle_script(seed, 200))
    assert not problems, differing(problems)


# KV, documents and vectors on forks promoted both ways and deleted, a space deleted under
# them, with history, listings and scans at the head and as of earlier commits.
@pytest.mark.parametrize("seed", range(20))
def test_random_history_commands_match_the_real_engine(seed):
    problems = in_memory_differences(random_history_script(seed, 200))
    assert not problems, differing(problems)


def test_the_comparison_catches_a_wrong_conflict_kind():
    """Conflict kinds are compared, not masked: one reported as the other is caught."""
    class Skewed(StrataServer):
        def call_tool(self, name, arguments):
            text, is_error = super().call_tool(name, arguments)
            return text.replace('"modify_delete_divergence"', '"value_divergence"'), is_error

    script = SCRIPTS["merge_conflicts"][:31]
    assert in_memory_differences(script) == []
    problems = in_memory_differences(script, Skewed)
    assert len(problems) == 2 and all("branch_preview" in p for p in problems)
