"""A command that needs only its own module's parser does not import the others: an index run
or a one-shot query pays no start-up for the proxy or the MCP server it does not use."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from memstrata.harness.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.startswith(("memstrata.harness.proxy", "memstrata.mcp_server", "mcp.")))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["index"], ["status"], ["query", "what does greet return"]])
def test_index_and_query_commands_import_no_server(tmp_path, argv):
    (tmp_path / "a.py").write_text("def greet(name):\n    return 'hello ' + name\n")
    subprocess.run([sys.executable, "-m", "memstrata", "index", str(tmp_path)], check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv, str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "MEMSTRATA_DAEMON": "off"}, timeout=120)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report == {"code": 0, "heavy": []}, proc.stderr
