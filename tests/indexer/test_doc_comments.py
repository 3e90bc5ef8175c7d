"""A definition's doc comment where the language writes it, though the tree puts something
between them: a Go type's above its `type` declaration (the definition is the spec inside it),
a TypeScript function's above its first overload signature, a decorated member's above its
decorators."""

from __future__ import annotations

from memstrata.compressor import context_query
from memstrata.indexer.parse import parse_source

from ..conftest import indexed_workspace

GO = b"""\
package shop

// Cart holds the items of one order.
type Cart struct{}

// Store is where carts are kept.
type Store interface{}

type (
	// Item is one line of a cart.
	Item struct{}
	Count int
)

// Limit is the most items a cart holds.
const Limit = 10

// Add puts an item in the cart.
func (c *Cart) Add(i Item) {}
"""


def test_go_type_doc_comment_stands_above_its_declaration():
    docs = {s.qualname: s.docstring for s in parse_source("shop.go", "go", GO).symbols}
    assert docs["Cart"] == "Cart holds the items of one order."
    assert docs["Store"] == "Store is where carts are kept."
    assert docs["Item"] == "Item is one line of a cart."  # in a group, each spec's own
    assert docs["Count"] is None
    assert docs["Limit"] == "Limit is the most items a cart holds."
    assert docs["Cart.Add"] == "Add puts an item in the cart."


TS = b"""\
/** Parses a size written as text or as a number of bytes. */
export function size(x: string): number
export function size(x: number): number
export function size(x: any): number {
  return Number(x)
}

export class Cache {
  /** Drops every entry older than the limit. */
  @logged()
  prune(): void {}
}

/** Not the doc of what follows a function. */
export function other(): void {}
export function after(): void {}
"""


def test_typescript_doc_above_overloads_and_decorators():
    docs = {s.qualname: s.docstring for s in parse_source("size.ts", "typescript", TS).symbols}
    assert docs["size"] == "Parses a size written as text or as a number of bytes."
    assert docs["Cache.prune"] == "Drops every entry older than the limit."
    assert docs["other"] == "Not the doc of what follows a function."
    assert docs["after"] is None  # another function is no overload of it


def test_question_in_the_words_of_a_go_type_doc_finds_the_type(tmp_path):
    filler = "".join(f"func helper{i}(x int) int {{\n\treturn x + {i}\n}}\n\n" for i in range(30))
    files = {
        "go.mod": "module example.com/shop\n\ngo 1.21\n",
        "books.go": (
            "package shop\n\n"
            "// Ledger reconciles the nightly settlement batches.\n"
            "type Ledger struct {\n\tentries []int\n}\n\n" + filler),
        "util.go": "package shop\n\n" + filler.replace("helper", "util"),
    }
    with indexed_workspace(tmp_path, files) as ws:
        sl = context_query(ws, "reconcile the nightly settlement batches", max_tokens=400)
    # Only the doc comment holds these words: without it nothing matches and an overview is shown.
    assert not any("nothing in the project matches" in n for n in sl.notes)
    assert sl.symbols[0] == "books.go::Ledger"
