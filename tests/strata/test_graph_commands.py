"""The graph commands past the curated tools, held to stratadb 1.2.7 (issue 23).

Scripted histories (graph_scenarios.py) and random graph histories run
through MemStrata's server and the real engine side by side; answers are
compared after masking ids and times, analytics scores within 1e-6.
"""

from __future__ import annotations

import json

import pytest

from memstrata.strata.mcp import StrataServer

from .differential import differing, in_memory_differences
from .graph_scenarios import SCRIPTS, random_graph_script


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_graph_script_matches_the_real_engine(name):
    problems = in_memory_differences(SCRIPTS[name])
    assert not problems, differing(problems)


@pytest.mark.parametrize("seed", range(10))
def test_random_graph_history_matches_the_real_engine(seed):
    problems = in_memory_differences(random_graph_script(seed, 120))
    assert not problems, differing(problems)


def test_the_comparison_catches_a_wrong_rank():
    """Scores are compared within 1e-6, not ignored: a rank off by 1e-5 is reported."""
    class Shifted(StrataServer):
        def call_tool(self, name, arguments):
            text, is_error = super().call_tool(name, arguments)
            if '"graph_pagerank_result"' in text:
                out = json.loads(text)
                out["data"]["ranks"]["a"] += 1e-5
                text = json.dumps(out)
            return text, is_error

    script = SCRIPTS["graph_analytics_time_travel"][:7]
    assert in_memory_differences(script) == []
    problems = in_memory_differences(script, Shifted)
    assert len(problems) == 1 and "graph_pagerank" in problems[0]
