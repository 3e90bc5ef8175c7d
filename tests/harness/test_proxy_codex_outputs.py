"""Codex CLI's shell outputs through the proxy: the openai SDK's ``client.responses`` -> memstrata -> stub.

Codex reads a file with a command (``cat``, ``sed -n 'A,Bp'``, ``nl -ba``) and hands the model
the command's text wrapped: a status header (``Exit code: 0`` / ``Wall time: ..`` / ``Output:``;
its ``exec_command`` tool writes ``Chunk ID`` / ``Process exited with code``) or a JSON envelope
(``{"output": .., "metadata": {..}}``).  The text inside is compressed exactly as the same text
sent bare, and goes back into the same wrapper.
"""

import json
import re

import openai
import pytest

from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.compress_request import CompressionSettings
from memstrata.harness.proxy.forward import ProxyConfig
from memstrata.indexer.workspace import Workspace
from tests.stub_provider import ServerThread, StubUpstream

KEY = "sk-test-codex-outputs"
PATH = "tally/ledger.py"
QUESTION = "Why does settle_refund round the refund down instead of up?"

_STEPS = ["open", "post", "void", "merge", "split", "audit", "freeze", "thaw", "rename", "close"]


def _function(name: str, n: int) -> str:
    return (f"def {name}(entries, limit={n}):\n"
            f'    """Walk the entries and {name.replace("_", " ")} the ones under the limit."""\n'
            f"    kept = []\n"
            f"    for entry in entries:\n"
            f"        if entry.amount_cents < limit * {n + 3}:\n"
            f"            kept.append(entry.with_note('{name} step {n}'))\n"
            f"        elif entry.flagged:\n"
            f"            kept.append(entry.flag('{name} over {n}'))\n"
            f"    return kept\n")


SETTLE = '''def settle_refund(entry, ratio):
    """A refund is rounded down: the shop never pays back more than it took."""
    cents = entry.amount_cents * ratio
    return int(cents // 1)
'''

# Two sections of the same helpers, word for word (a copy kept for the old file format): a range
# of lines from the second one is also, verbatim, a range of the first.
SECTION = "".join("\n\n" + _function(f"{step}_batch", k) for k, step in enumerate(_STEPS))
LEDGER = ('"""Ledger entries, batches and refunds (a project made up for these tests)."""\n\n'
          + "".join("\n\n" + _function(f"{step}_entries", k) for k, step in enumerate(_STEPS))
          + "\n\n" + SETTLE
          + "\n\n# -- batches, current format --" + SECTION
          + "\n\n# -- batches, legacy format (same helpers) --" + SECTION)
LINES = LEDGER.split("\n")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("codex") / "tally-app"
    (root / "tally").mkdir(parents=True)
    (root / "tally" / "__init__.py").write_text("")
    (root / "tally" / "ledger.py").write_text(LEDGER)
    (root / "tally" / "report.py").write_text(
        "from tally.ledger import settle_refund\n\n\ndef refund_line(entry):\n"
        "    return f'{entry.customer}: {settle_refund(entry, 0.5)}'\n")
    ws = Workspace.open(root)
    ws.index()
    yield ws
    ws.close()


@pytest.fixture(scope="module")
def stub():
    with StubUpstream(answer="ok").running() as s:
        yield s


@pytest.fixture(scope="module")
def proxy(project, stub):
    # Limits scaled to the small project: a read over 300 tokens is cut when it arrives (a file the
    # question names too: likely_file off), as a 16,000-token read is with the defaults.
    settings = CompressionSettings.for_mode("safe", min_tokens=100, paste_cap=0, result_cap=300, likely_file=0)
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, compression=settings, trust_env=False)
    with ServerThread(build_app(project, HarnessConfig(proxy=cfg))) as server:
        yield server


_conversations = iter(range(10_000))


def forwarded_output(proxy, stub, output, command: str, question: str = QUESTION):
    """Send one Codex turn (the user's question, a shell call, its output) in a conversation of its
    own; what the provider got as the output."""
    n = next(_conversations)
    call = {"type": "function_call", "call_id": f"call_{n}", "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", command], "workdir": "/home/dev/tally-app"})}
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]}, call,
             {"type": "function_call_output", "call_id": f"call_{n}", "output": output}]
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=KEY, max_retries=0)
    client.responses.create(model="gpt-5-codex", instructions=f"codex session {n}", input=items)
    sent = stub.received[-1].json()["input"]
    assert sent[1] == call
    # The next turn resends the output: it goes in the form it went in the first time, byte for
    # byte (the provider's cached prefix holds).
    later = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And then?"}]}]
    client.responses.create(model="gpt-5-codex", instructions=f"codex session {n}", input=items + later)
    assert stub.received[-1].json()["input"][:3] == sent
    return sent[2]["output"]


def cat_n(lines, first=1):
    return "\n".join(f"{first + i:6}\t{line}" for i, line in enumerate(lines))


MARKER = re.compile(r"^\s*# \[memstrata: lines (\d+)-(\d+) of (\S+) elided")


def assert_exact_lines(form: str, first: int, last: int, numbered: bool = False):
    """Every line ``form`` shows is the file's line it stands for, and every marker names exactly the
    file lines missing between the lines shown around it: together they are lines first..last (blank
    lines at the end aside: a piece is its code, the blank lines around it are left as they are)."""
    at = first
    for line in form.rstrip("\n").split("\n"):
        m = MARKER.match(line)
        if m:
            assert m.group(3) == PATH and int(m.group(1)) == at, (line, at)
            at = int(m.group(2)) + 1
            continue
        if numbered:
            number, _, line = line.partition("\t")
            assert int(number) == at, (number, at)
        assert line.rstrip() == LINES[at - 1].rstrip(), (at, line)
        at += 1
    assert at <= last + 1 and not "".join(LINES[at - 1:last]).strip(), (at, last)


# Lines of the legacy section: the same helpers, verbatim, as the current section's.
LEGACY = LINES.index("# -- batches, legacy format (same helpers) --") + 1  # its 1-based line
CURRENT = LINES.index("# -- batches, current format --") + 1


def test_a_sed_range_of_repeated_code_is_cut_at_the_lines_the_command_printed(proxy, stub):
    first, last = LEGACY + 3, LEGACY + 3 + 10 * 11 - 3  # the legacy helpers, without the section's comment
    text = "\n".join(LINES[first - 1:last]) + "\n"
    assert text in "\n".join(LINES[CURRENT:LEGACY]) + "\n"  # the same lines are in the current section
    question = "Why does audit_batch keep flagged entries over the limit?"
    sent = forwarded_output(proxy, stub, text, f"sed -n '{first},{last}p' {PATH}", question)
    assert "[memstrata: lines" in sent and "def audit_batch(entries, limit=5):" in sent
    assert_exact_lines(sent, first, last)  # the markers name the legacy section's lines
    # The same text from a command that does not say where it starts: two places fit, so no line
    # number can be trusted, and the read goes whole.
    assert forwarded_output(proxy, stub, text, f"cat legacy_copy.txt {PATH}", question) == text


HEADER = "Exit code: 0\nWall time: 0.1 seconds\nOutput:\n"
EXEC_HEADER = "Chunk ID: 4f1c2a\nWall time: 0.0031 seconds\nProcess exited with code 0\nOriginal token count: 2400\nOutput:\n"


@pytest.mark.parametrize("header", [HEADER, "Exit code: 0\nWall time: 1.4 seconds\nTotal output lines: 250\nOutput:\n",
                                    EXEC_HEADER])
def test_a_status_header_keeps_its_lines_and_the_file_text_after_it_is_cut_as_bare(proxy, stub, header):
    plain = LEDGER  # `cat tally/ledger.py`, or `sed -n '1,400p'` of a file shorter than that
    bare = forwarded_output(proxy, stub, plain, f"cat {PATH}")
    wrapped = forwarded_output(proxy, stub, header + plain, f"sed -n '1,400p' {PATH}")
    assert "[memstrata: lines" in bare and len(bare) < len(plain) // 2
    assert wrapped == header + bare  # the header as it came, the text as the bare read was cut
    assert "def settle_refund(entry, ratio):" in bare
    assert_exact_lines(bare, 1, len(LINES))



def test_a_json_envelope_is_re_encoded_with_its_keys_and_metadata_around_the_cut_text(proxy, stub):
    numbered = cat_n(LINES)
    bare = forwarded_output(proxy, stub, numbered, f"cat -n {PATH}")
    envelope = json.dumps({"output": numbered, "metadata": {"exit_code": 0, "duration_seconds": 0.1}},
                          separators=(",", ":"), ensure_ascii=False)  # serde_json's compact form
    sent = forwarded_output(proxy, stub, envelope, f"cat -n {PATH}")
    assert sent.startswith('{"output":"') and sent.endswith(',"metadata":{"exit_code":0,"duration_seconds":0.1}}')
    decoded = json.loads(sent)
    assert list(decoded) == ["output", "metadata"]
    assert decoded["output"] == bare and "[memstrata: lines" in bare
    assert "settle_refund" in bare
    assert_exact_lines(bare, 1, len(LINES), numbered=True)
    # Small enough to stay whole (the current task's read): the same whole text, in the same envelope.
    head = "\n".join(LINES[:12]) + "\n"
    small = json.dumps({"output": head, "metadata": {"exit_code": 0, "duration_seconds": 0.0}},
                       separators=(",", ":"))
    assert forwarded_output(proxy, stub, small, f"sed -n '1,12p' {PATH}") == small


def test_only_codex_shapes_are_unwrapped(proxy, stub):
    """One request, several outputs: the two Codex shapes are cut, anything else goes as it came."""
    plain = LEDGER
    odd = {
        "an unknown header line": "Exit code: 0\nRetries: 2\nWall time: 0.1 seconds\nOutput:\n" + plain,
        "no wall time": "Exit code: 0\nOutput:\n" + plain,
        "an envelope without metadata": json.dumps({"output": plain, "exit_code": 0}),
        "an envelope the standard library writes otherwise": '{"output":' + json.dumps(plain, ensure_ascii=False)
        + ',"metadata":{"exit_code":0,"duration_seconds":1e-5}}',
        "apply_patch's answer": json.dumps({"output": f"Success. Updated the following files:\nM {PATH}\n",
                                            "metadata": {"exit_code": 0, "duration_seconds": 0.0}},
                                           separators=(",", ":")),
    }
    outputs = {"header": HEADER + plain,
               "envelope": json.dumps({"output": plain, "metadata": {"exit_code": 0, "duration_seconds": 0.2}},
                                      separators=(",", ":"), ensure_ascii=False), **odd}
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]}]
    for k, output in enumerate(outputs.values()):
        items.append({"type": "function_call", "call_id": f"c{k}", "name": "shell",
                      "arguments": json.dumps({"command": ["bash", "-lc", f"cat {PATH}"]})})
        items.append({"type": "function_call_output", "call_id": f"c{k}", "output": output})
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=KEY, max_retries=0)
    client.responses.create(model="gpt-5-codex", instructions="several shapes", input=items)
    sent = stub.received[-1].json()["input"]
    got = dict(zip(outputs, (item["output"] for item in sent[2::2])))
    assert got["header"].startswith(HEADER) and "[memstrata: lines" in got["header"]
    assert "[memstrata: lines" in json.loads(got["envelope"])["output"]
    for name in odd:
        assert got[name] == outputs[name], name
