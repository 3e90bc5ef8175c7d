"""A name in capitals (`LRU`, `EMA`, `URL`), written so as a plain word of a request, names the
definition: too short for the plain-word rule (four letters or more), it was ranked by its words,
and a class's key method went with the cut."""

from memstrata.compressor.block import Block, BlockSettings, compress_block

SETTINGS = BlockSettings(min_tokens=100, ranked_share=0.2, ranked_cap=200, min_ranked=1)


def _module() -> list[str]:
    lines = ["import time", ""]
    for k in range(8):  # other definitions, each about as long as the class
        lines += [f"def step_{k}(entries, limit):", *[f"    total_{j} = len(entries) * {k + j} + limit"
                                                      for j in range(8)],
                  "    return " + " + ".join(f"total_{j}" for j in range(8)), "", ""]
    lines += ["class LRU:", '    """Entries kept by the time of their last use."""', "",
              "    def __init__(self, size):", "        self.size = size", "        self.entries = {}", "",
              "    def __call__(self, key, value):",
              "        self.entries[key] = (time.monotonic(), value)",
              "        if len(self.entries) > self.size:",
              "            oldest = min(self.entries, key=lambda k: self.entries[k][0])",
              "            del self.entries[oldest]", "        return value", ""]
    return lines


def _cut(question: str):
    lines = _module()
    block = Block(lines, lines, list(range(1, len(lines) + 1)), "python", "cache/lru.py")
    return compress_block(block, question, SETTINGS)


def test_a_class_named_in_capitals_as_a_plain_word_is_kept_whole():
    cut = _cut("The LRU class drops the wrong entry; explain its order")
    assert cut is not None
    assert "del self.entries[oldest]" in cut.text and "def __call__(self, key, value):" in cut.text


def test_the_same_letters_in_lower_case_or_as_part_of_a_word_name_nothing():
    for question in ("the lru class drops the wrong entry; explain its order",
                     "LRUS drop the wrong entry; explain their order"):
        cut = _cut(question)
        assert cut is None or "del self.entries[oldest]" not in cut.text, question
