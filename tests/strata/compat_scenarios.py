"""Scripts for compatibility defects found by differential testing, one per rule.

Each script runs through MemStrata's server and the real engine side by side
(test_compat.py); a script names the general rule it holds, with the inputs
that showed the difference and their neighbours.
"""

from __future__ import annotations

import base64

B = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
CMD = "strata_command"


def raw(*commands):
    return [(CMD, {"command": c}) for c in commands]


# -- JSON path grammar -------------------------------------------------------------------------

_DOC = {"a": {"b": [1, {"c": 2}]}, "arr": [0, 1, [5, 6]], "s": "str", "a\\b": "BS", "a'b": "Q",
        'a"b': "DQ", "x y": 1, "0": "zero", "\u0345x": "mark"}
# Bracket keys with escapes (a backslash escapes the quote and itself, nothing else), a key straight
# after `$`, a signed index, a dot before a bracket, and the errors next to them.
_PATHS = ["$['a\\\\b']", "$['a\\b']", "$['a\\'b']", '$["a\\"b"]', "$['a\\\"b']", '$["a\\\'b"]', "$['a\\nb']",
          "$['a\\\\']", "$['a\\']", "$['\\']", "$a", "$0", "$a.b[1].c", "$arr[+1]", "$.arr[+1]", "$.arr[++1]",
          "$.arr[-0]", "$.arr[]", "$[] +", "$.[0]", "$.a.[0]", "$['a'].[0]", "$.a..b", "$.a.", ".a", "$.[",
          "$['a'x]", "$['a'", "$[1]]", "$.\u0345x", "$.a\u24b6", "$.a\u0301", "a.b[1]", "$[+0]"]
JSON_PATHS = []
for _p in _PATHS:
    JSON_PATHS += raw({"type": "json_set", "key": "e", "path": "$", "value": _DOC},
                      {"type": "json_get", "key": "e", "path": _p},
                      {"type": "json_set", "key": "e", "path": _p, "value": {"new": 1}},
                      {"type": "json_delete", "key": "e", "path": _p},
                      {"type": "json_get", "key": "e", "path": "$"})

SCRIPTS = {"json_paths": JSON_PATHS}
