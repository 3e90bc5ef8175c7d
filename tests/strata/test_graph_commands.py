"""The graph commands past the curated tools, held to stratadb 1.2.7 (issue 23).

Scripted histories (graph_scenarios.py) and random graph histories run
through MemStrata's server and the real engine side by side; answers are
compared after masking ids and times, analytics scores within 1e-6.
"""

from __future__ import annotations

import json

import pytest

from memstrata.strata.engine import Engine
from memstrata.strata.mcp import StrataServer
from memstrata.strata.store import StrataStore

from .differential import run_script
from .graph_scenarios import SCRIPTS, random_graph_script
from .oracle import OracleSession


def _problems(script, server_class=StrataServer) -> list[str]:
    store, oracle = StrataStore.memory(), OracleSession()
    try:
        return run_script(script, server_class(Engine(store)), oracle)
    finally:
        store.close()
        oracle.close()


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_graph_script_matches_the_real_engine(name):
    problems = _problems(SCRIPTS[name])
    assert not problems, f"{len(problems)} step(s) differ from stratadb:\n" + "\n".join(problems[:10])


@pytest.mark.parametrize("seed", range(10))
def test_random_graph_history_matches_the_real_engine(seed):
    problems = _problems(random_graph_script(seed, 120))
    assert not problems, f"{len(problems)} step(s) differ from stratadb:\n" + "\n".join(problems[:10])


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
    assert _problems(script) == []
    problems = _problems(script, Shifted)
    assert len(problems) == 1 and "graph_pagerank" in problems[0]
