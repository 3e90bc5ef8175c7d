"""Graph ontologies, node object types and entity bindings, held to stratadb 1.2.7 (issue 23).

Scripted histories (ontology_scenarios.py) and random ones run through
MemStrata's server and the real engine side by side, compared after masking
ids and times.
"""

from __future__ import annotations

import re

import pytest

from memstrata.strata.engine import Engine
from memstrata.strata.mcp import StrataServer
from memstrata.strata.store import StrataStore

from .differential import run_script
from .oracle import OracleSession
from .ontology_scenarios import SCRIPTS, random_ontology_script


def _problems(script, server_class=StrataServer) -> list[str]:
    store, oracle = StrataStore.memory(), OracleSession()
    try:
        return run_script(script, server_class(Engine(store)), oracle)
    finally:
        store.close()
        oracle.close()


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_ontology_script_matches_the_real_engine(name):
    problems = _problems(SCRIPTS[name])
    assert not problems, f"{len(problems)} step(s) differ from stratadb:\n" + "\n".join(problems[:10])


@pytest.mark.parametrize("seed", range(8))
def test_random_ontology_history_matches_the_real_engine(seed):
    problems = _problems(random_ontology_script(seed, 150))
    assert not problems, f"{len(problems)} step(s) differ from stratadb:\n" + "\n".join(problems[:10])


def test_the_comparison_catches_a_wrong_node_count():
    """Usage counts are compared, not masked: a summary one node off is reported."""
    class Skewed(StrataServer):
        def call_tool(self, name, arguments):
            text, is_error = super().call_tool(name, arguments)
            if '"graph_ontology_summary_result"' not in text:
                return text, is_error
            return re.sub(r'"node_count":(\d+)', lambda m: f'"node_count":{int(m.group(1)) + 1}', text), is_error

    script = SCRIPTS["ontology_nodes_by_type"][:20]
    assert _problems(script) == []
    problems = _problems(script, Skewed)
    assert len(problems) == 1 and "graph_ontology_summary" in problems[0]
