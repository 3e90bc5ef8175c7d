"""Graph ontologies, node object types and entity bindings, held to stratadb 1.2.7 (issue 23).

Scripted histories (ontology_scenarios.py) and random ones run through
MemStrata's server and the real engine side by side, compared after masking
ids and times.
"""

from __future__ import annotations

import re

import pytest

from memstrata.strata.mcp import StrataServer

from .differential import differing, in_memory_differences
from .ontology_scenarios import SCRIPTS, random_ontology_script


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_ontology_script_matches_the_real_engine(name):
    problems = in_memory_differences(SCRIPTS[name])
    assert not problems, differing(problems)


@pytest.mark.parametrize("seed", range(8))
def test_random_ontology_history_matches_the_real_engine(seed):
    problems = in_memory_differences(random_ontology_script(seed, 150))
    assert not problems, differing(problems)


def test_the_comparison_catches_a_wrong_node_count():
    """Usage counts are compared, not masked: a summary one node off is reported."""
    class Skewed(StrataServer):
        def call_tool(self, name, arguments):
            text, is_error = super().call_tool(name, arguments)
            if '"graph_ontology_summary_result"' not in text:
                return text, is_error
            return re.sub(r'"node_count":(\d+)', lambda m: f'"node_count":{int(m.group(1)) + 1}', text), is_error

    script = SCRIPTS["ontology_nodes_by_type"][:20]
    assert in_memory_differences(script) == []
    problems = in_memory_differences(script, Skewed)
    assert len(problems) == 1 and "graph_ontology_summary" in problems[0]
