"""Blocks cut with the project ranking's chances: a block keeps the definitions the whole
project says are likeliest, even where the question's own words point elsewhere in it.

Real parts: fixtures/proxy_project indexed in a scratch copy, real parses and rankings.
"""

import dataclasses
from pathlib import Path

import pytest

from memstrata.compressor.block import Block, BlockSettings, compress_block
from memstrata.compressor.block_rank import prepare
from memstrata.compressor.chances import symbol_chances
from memstrata.indexer.workspace import Workspace

ORDERS = "shop/orders.py"
SETTINGS = BlockSettings(min_tokens=200, ranked_share=0.25, rel_score=0.3, min_ranked=2)


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    root = tmp_path_factory.mktemp("chances") / "shop_project"
    src = Path(__file__).resolve().parents[2] / "fixtures" / "proxy_project"
    for f in src.rglob("*.py"):
        dest = root / f.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(f.read_text())
    with Workspace.open(root, workers=1) as ws:
        ws.index()
        yield ws


def _block(ws) -> Block:
    code = (ws.root / ORDERS).read_text().split("\n")
    return Block(code, code, list(range(1, len(code) + 1)), "python", ORDERS)


def test_a_named_definition_is_certain_and_the_answer_is_remembered(shop):
    chances = symbol_chances(shop, "Why does Order.refund reject an order that was shipped 31 days ago?")
    assert chances[f"{ORDERS}::Order.refund"] == 1.0
    assert all(0.0 < p <= 1.0 for p in chances.values())
    assert symbol_chances(shop, "Why does Order.refund reject an order that was shipped 31 days ago?") is chances
    assert symbol_chances(shop, "   ") == {}


def test_a_likely_definition_is_kept_whole_where_the_blocks_own_words_point_elsewhere(shop):
    # The question's words point into the block at OrderBook.revenue; the definition the project
    # ranking gives a high chance (here Order.cancel, which none of its words name) is kept too,
    # whole, though the block's own ranking leaves it out.
    question = "the revenue report is wrong: refunded orders must not count"
    block = _block(shop)
    alone = compress_block(block, prepare(question), SETTINGS)
    assert alone is not None and "OrderBook.revenue" in alone.kept and "Order.cancel" not in alone.kept
    likely = compress_block(block, dataclasses.replace(prepare(question), chances={"Order.cancel": 0.6}), SETTINGS)
    assert likely is not None and "Order.cancel" in likely.kept
    source = (shop.root / ORDERS).read_text()
    cancel = source[source.index("    def cancel("):source.index("    def refund(")].rstrip()
    assert cancel in likely.text
    # A chance under the block's threshold changes nothing.
    faint = compress_block(block, dataclasses.replace(prepare(question), chances={"Order.cancel": 0.01}), SETTINGS)
    assert faint is not None and faint.kept == alone.kept
