"""The plain-path shortcut of the JSON path reader gives exactly what the engine's whole grammar
gives (the side-by-side scenarios check that grammar against the real engine)."""

from __future__ import annotations

import random
import re
import string

from memstrata.strata import jsondocs


def test_plain_paths_read_at_once_equal_the_whole_grammar(monkeypatch):
    rng = random.Random(7)
    first, rest = string.ascii_letters + "_", string.ascii_letters + "_" + string.digits
    paths = ["$.a", "a", "$.profile.n", "_x._y9", "$.A1.b2.c3"]
    for _ in range(3000):
        parts = ["".join([rng.choice(first)] + [rng.choice(rest) for _ in range(rng.randrange(8))])
                 for _ in range(rng.randrange(1, 5))]
        paths.append(("$." if rng.random() < 0.7 else "") + ".".join(parts))
    fast = [jsondocs.parse_path(p) for p in paths]
    monkeypatch.setattr(jsondocs, "_PLAIN_PATH", re.compile(r"(?!)"))  # every path through the grammar
    assert fast == [jsondocs.parse_path(p) for p in paths]
