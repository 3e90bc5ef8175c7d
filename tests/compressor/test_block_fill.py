"""A cut to a size (``fill``) spends its budget even when the question's words match only
statements: the imports of a read are a place in the file to fill from, not the whole cut.

Real parts: real parses of a module written here.
"""

from memstrata.compressor.block import Block, BlockSettings, compress_block
from memstrata.compressor.tokens import count_tokens


def _module() -> str:
    head = "import http.client\nimport http.cookies\nfrom http import HTTPStatus\n\n\n"
    bodies = []
    for k in range(10):
        lines = [f"def step_{k}(frame, limit={k + 2}):", f'    """Advance the frame by one step of kind {k}."""']
        lines += [f"    value_{j} = frame.read({j}) * {k + j} + limit" for j in range(12)]
        lines += ["    return " + " + ".join(f"value_{j}" for j in range(12))]
        bodies.append("\n".join(lines))
    return head + "\n\n\n".join(bodies) + "\n"


def _cut(question: str, cap: int):
    code = _module().split("\n")
    block = Block(code, code, list(range(1, len(code) + 1)), "python", "engine/steps.py")
    settings = BlockSettings(min_tokens=100, ranked_share=1.0, ranked_cap=cap, rel_score=0.0, fill=True,
                             min_ranked=2)
    return compress_block(block, question, settings), count_tokens(_module())


def test_a_cut_whose_only_match_is_the_imports_fills_its_budget_from_there():
    cut, before = _cut("fix the duplicated words in the http comments", cap=600)
    assert cut is not None and before > 1500
    # not just the import lines and a marker for every definition: whole definitions up to about the cap
    whole = [k for k in range(10)
             if f"def step_{k}(" in cut.text and f"value_11 = frame.read(11) * {k + 11}" in cut.text]
    assert whole and whole[0] == 0          # filled from where the match is: the top of the file
    assert 300 <= cut.tokens_after <= 700


def test_a_cut_that_matches_a_definition_still_fills_around_it():
    cut, _ = _cut("step_6 advances the frame too far", cap=600)
    assert cut is not None
    assert "value_11 = frame.read(11) * 17" in cut.text   # the named definition, whole
    assert "def step_5(" in cut.text or "def step_7(" in cut.text   # and its neighbours first
