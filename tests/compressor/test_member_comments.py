"""A member's doc comment belongs to the member, not to its class's frame.

A frame is kept whenever one of its members is, so a frame that owned its members' doc comments
brought every sibling's documentation along with the one member a question needs.

Real parts: real parses of classes written here, in three languages' comment styles.
"""

import pytest

from memstrata.compressor.block import Block, BlockSettings, compress_block
from memstrata.compressor.outline import build_outline

METHODS = ["open", "close", "flush", "rewind", "truncate", "resize", "lock", "unlock"]


def _members(doc, signature, statement, ret, close=()) -> list[str]:
    """Every method of METHODS: its comment (``doc(name, k)``), its signature and a body of
    seven lines (``statement(j, k)``, then ``ret`` of the sum)."""
    lines = []
    for k, name in enumerate(METHODS):
        lines += [*doc(name, k), signature(name)]
        lines += [statement(j, k) for j in range(6)]
        lines += [ret + " + ".join(f"v{j}" for j in range(6)) + (";" if close else ""), *close, ""]
    return lines


def _summary(name: str, k: int) -> str:
    return f"{name.title()} the journal: step {k} of its life, documented at length."


def _typescript(blank: bool) -> list[str]:
    members = _members(
        lambda name, k: ["  /**", f"   * {_summary(name, k)}", "   *",
                         f"   * @param {{number}} limit - how far {name} may go", "   */", *([""] if blank else [])],
        lambda name: f"  {name}(limit: number): number {{",
        lambda j, k: f"    const v{j} = this.entries.length * {k + j} + limit;", "    return ", ["  }"])
    # a second top-level definition: a block holding one definition is never cut
    return ["export class Journal {", "  private entries: string[] = [];", "", *members,
            "}", "", "export function openJournal(): Journal {", "  return new Journal();", "}"]


def _java() -> list[str]:
    members = _members(
        lambda name, k: ["    /**", f"     * {_summary(name, k)}", f"     * @param limit how far {name} may go",
                         "     */"],
        lambda name: f"    public int {name}(int limit) {{",
        lambda j, k: f"        int v{j} = entries.size() * {k + j} + limit;", "        return ", ["    }"])
    field = "    private final java.util.List<String> entries = new java.util.ArrayList<>();"
    return ["public class Journal {", field, "", *members, "}", "", "class JournalIndex {", "    int size;", "}"]


def _python() -> list[str]:
    members = _members(
        lambda name, k: [f"    # {_summary(name, k)}", f"    # Goes at most `limit` entries far to {name}."],
        lambda name: f"    def {name}(self, limit):",
        lambda j, k: f"        v{j} = len(self.entries) * {k + j} + limit", "        return ")
    return ["class Journal:", '    """Entries kept in order."""', "", *members, "", "def open_journal():",
            "    return Journal()"]


CASES = [("typescript", "store/journal.ts", _typescript(False)),
         ("typescript", "store/journal.ts", _typescript(True)),   # a doc block set apart by a blank line
         ("java", "src/Journal.java", _java()),
         ("python", "store/journal.py", _python())]


@pytest.mark.parametrize("language, path, lines", CASES)
def test_each_member_owns_its_doc_comment(language, path, lines):
    outline = build_outline(lines, language, path)
    frames = [u for u in outline.units if u.kind == "frame"]
    assert frames and all("documented at length" not in u.text for u in frames)
    for name in METHODS:
        member = next(u for u in outline.units if u.name == name)
        assert f"{name.title()} the journal" in member.text


@pytest.mark.parametrize("language, path, lines", CASES)
def test_a_kept_member_brings_only_its_own_documentation(language, path, lines):
    block = Block(lines, lines, list(range(1, len(lines) + 1)), language, path)
    settings = BlockSettings(min_tokens=100, ranked_share=0.2, ranked_cap=200, min_ranked=1)
    cut = compress_block(block, "why does truncate drop the last entry", settings)
    assert cut is not None
    assert "Truncate the journal" in cut.text and "truncate(" in cut.text
    elided = [name for name in METHODS if f" {name}(" not in cut.text]
    assert len(elided) >= 4
    # an elided member's documentation is elided with it, not kept with the frame
    assert not any(f"{name.title()} the journal" in cut.text for name in elided)
