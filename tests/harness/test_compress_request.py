"""What the proxy forwards: compression inside blocks, conversation state, prefix stability.

Real parts: an indexed copy of fixtures/proxy_project, real tree-sitter parses,
real token counts.  The proxy's HTTP side is in test_proxy.py.
"""

import copy
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor
from memstrata.harness.proxy.compaction import QUESTION_CHARS, matching_runs, real_text
from memstrata.harness.proxy.conversation import ConversationStore
from memstrata.harness.proxy.gutter import unpad_gutter

# Thresholds scaled to the fixture's files (the defaults are for real projects).
CUT = CompressionSettings.for_mode("safe", paste_cap=0, min_tokens=400)
# Compaction mechanics: any result but the latest two may be compacted (the current task's are not
# singled out), and a step is priced as if a long session lay ahead (horizon), so the fixture's small
# files make steps that pay.
AGENT = CompressionSettings.for_mode("safe", min_tokens=400, trigger=3000, clear_at_least=1200,
                                     keep_tool_uses=2, keep_task_tool_uses=0, horizon_share=10.0, horizon=100)
QUESTION = "Why does Order.refund reject an order that was shipped 31 days ago?"


def read(ws, path):
    return (ws.root / path).read_text()


def cat_n(text, arrow=False):
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    sep = "→" if arrow else "\t"
    return "\n".join(f"{i:>6}{sep}{line}" for i, line in enumerate(lines, 1))


def source_of(ws, path, first_line):
    """The lines of the definition starting with ``first_line`` (through the next blank-line-separated def)."""
    lines = read(ws, path).split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith(first_line))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    while not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end])


def paste(ws, question, *paths):
    parts = [question]
    for p in paths:
        parts.append(f"{p}:\n```python\n{read(ws, p)}```")
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": "\n\n".join(parts)}]}


def forwarded(res, body):
    return (res.body or body)["messages"]


# -- pastes ---------------------------------------------------------------------------


def test_single_function_paste_is_forwarded_unchanged(shop_ws):
    comp = Compressor(shop_ws, CUT)
    for first in ("def place_order(", "class Order:"):  # a function, and a whole class: one definition each
        code = source_of(shop_ws, "shop/orders.py", first)
        body = {"model": "m", "messages": [{"role": "user", "content": f"```python\n{code}\n```\n{QUESTION}"}]}
        res = comp.compress(body, "openai")
        assert res.body is None, res.reason


def test_whole_file_paste_keeps_the_asked_function_whole(shop_ws):
    body = paste(shop_ws, QUESTION, "shop/orders.py")
    original = copy.deepcopy(body)
    res = Compressor(shop_ws, CUT).compress(body, "openai")
    assert res.changed, res.reason
    assert body == original  # the caller's body is not mutated
    text = res.body["messages"][0]["content"]
    assert text.startswith(QUESTION) and "shop/orders.py:\n```python\n" in text and text.endswith("```")
    assert source_of(shop_ws, "shop/orders.py", "def refund(") in text   # verbatim and whole
    assert "class Order:" in text                                        # its class frame
    assert "REFUND_WINDOW = timedelta(days=30)" in text                  # a module constant it uses
    assert "def summarize(order: Order) -> str:" not in text             # unrelated code is elided ...
    markers = [ln for ln in text.split("\n") if "[memstrata:" in ln]
    assert markers and all("of shop/orders.py elided" in m for m in markers)
    # ... behind markers naming the exact lines, so the reader can ask for them
    file_lines = read(shop_ws, "shop/orders.py").split("\n")
    for m in markers:
        a, b = (int(x) for x in m.split("lines ", 1)[1].split(" ", 1)[0].split("-"))
        hidden = [ln for ln in file_lines[a - 1:b] if ln.strip()]
        assert hidden and not any(ln in text.split("\n") for ln in hidden if len(ln.strip()) > 30)
    assert res.sources == ["shop/orders.py"] and "shop/orders.py::Order.refund" in res.slice_symbols
    assert 0 < res.replacement_tokens < res.replaced_tokens



def test_a_long_message_is_asked_by_its_last_words(shop_ws):
    """Notes or instructions before the code: the question at the end still points the cut."""
    notes = " ".join(f"note{i}" for i in range(3000))
    body = {"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "text", "text": notes, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": f"```python\n{read(shop_ws, 'shop/orders.py')}```\n{QUESTION}"}]}]}
    res = Compressor(shop_ws, CUT).compress(body, "anthropic")
    assert res.changed, res.reason
    blocks = res.body["messages"][0]["content"]
    assert blocks[0] == body["messages"][0]["content"][0]  # the notes, and their cache_control, untouched
    assert source_of(shop_ws, "shop/orders.py", "def refund(") in blocks[1]["text"]

def test_pastes_under_the_cap_stay_whole_by_default_and_aggressive_cuts_them(shop_ws):
    body = paste(shop_ws, QUESTION, "shop/orders.py")
    assert Compressor(shop_ws).compress(body, "openai").body is None  # safe: 2k tokens is not oversized
    res = Compressor(shop_ws, CompressionSettings.for_mode("aggressive", min_tokens=400)).compress(body, "openai")
    assert res.changed and source_of(shop_ws, "shop/orders.py", "def refund(") in res.body["messages"][0]["content"]


def test_edited_copy_and_vague_questions_leave_pastes_whole(shop_ws):
    comp = Compressor(shop_ws, CUT)
    edited = read(shop_ws, "shop/orders.py").replace("REFUND_WINDOW.days}-day", "REFUND_WINDOW.days} day")
    body = {"model": "m", "messages": [{"role": "user", "content": f"```python\n{edited}```\n{QUESTION}"}]}
    assert comp.compress(body, "openai").body is None  # not verbatim project code: never touched
    vague = paste(shop_ws, "Can you explain this to me?", "shop/orders.py")
    assert comp.compress(vague, "openai").body is None  # it points at nothing: nothing can be elided safely


@pytest.mark.parametrize("mode", ["safe", "aggressive"])
def test_a_question_naming_nothing_in_the_project_loses_no_code(shop_ws, mode):
    # A question none of whose words names or matches the project: context_query answers it with
    # an overview, but the proxy, ranking blocks the same way, finds nothing pointed at in any
    # block, so every paste goes whole however many there are.
    settings = CompressionSettings.for_mode(mode, paste_cap=0, min_tokens=400)
    for question in ("How does this work?", "zebra quantum flux capacitor"):
        body = paste(shop_ws, question, "shop/orders.py", "shop/inventory.py")
        assert Compressor(shop_ws, settings).compress(body, "openai").body is None


def test_a_paste_of_a_file_edited_since_it_was_indexed_goes_whole(tmp_path):
    """The index has not caught up with an edit (no watcher, or before it fires): a paste of the
    indexed text is not the file on disk any more, and markers numbered from the index would
    send the reader to the wrong lines."""
    import shutil

    from memstrata.indexer.workspace import Workspace

    from .conftest import SHOP

    root = tmp_path / "shop"
    shutil.copytree(SHOP, root)
    with Workspace.open(root) as ws:
        ws.index()
        indexed = read(ws, "shop/orders.py")
        body = {"model": "m", "messages": [{"role": "user", "content": f"```python\n{indexed}```\n{QUESTION}"}]}
        assert Compressor(ws, CUT).compress(body, "openai").changed  # while the file is as indexed
        (root / "shop/orders.py").write_text("# a line the index has not seen\n" + indexed)
        res = Compressor(ws, CUT).compress(body, "openai")
        assert res.body is None, res.reason


def test_blocks_the_question_does_not_point_at_are_elided_when_another_is(shop_ws):
    body = paste(shop_ws, "How is the VAT computed in tax_for?", "shop/pricing.py", "shop/inventory.py")
    res = Compressor(shop_ws, CUT).compress(body, "openai")
    text = res.body["messages"][0]["content"]
    assert source_of(shop_ws, "shop/pricing.py", "def tax_for(") in text
    assert "def reserve(self, sku: str, quantity: int)" not in text
    assert "of shop/inventory.py elided: OutOfStock" in text


def test_several_files_in_one_fence(shop_ws):
    code = "\n".join(f"# {p}\n{read(shop_ws, p)}" for p in ("shop/pricing.py", "shop/inventory.py"))
    body = {"model": "m", "messages": [{"role": "user", "content": f"```python\n{code}```\nHow does tax_for work?"}]}
    res = Compressor(shop_ws, CUT).compress(body, "openai")
    assert res.changed and set(res.sources) == {"shop/pricing.py", "shop/inventory.py"}
    assert source_of(shop_ws, "shop/pricing.py", "def tax_for(") in res.body["messages"][0]["content"]


def test_question_is_the_real_user_text():
    text = ("<system-reminder>The user opened shop/inventory.py; Inventory.restock</system-reminder>\n"
            "Why does Order.refund fail?\nshop/orders.py:\n```python\n```")
    assert real_text(text) == "Why does Order.refund fail?"


def test_tests_stay_out_unless_asked(shop_ws):
    code = read(shop_ws, "shop/orders.py") + (
        "\n\ndef test_refund_window():\n    order = Order('ana', 'DE')\n    order.state = 'delivered'\n"
        "    order.shipped_at = datetime(2024, 1, 1, tzinfo=timezone.utc)\n"
        "    late = order.shipped_at + REFUND_WINDOW + timedelta(days=1)\n"
        "    with pytest.raises(OrderError):\n        order.refund(now=late)\n")
    path = shop_ws.root / "shop" / "orders_more.py"
    path.write_text(code)
    shop_ws.index()
    try:
        comp = Compressor(shop_ws, CUT)
        ask = paste(shop_ws, "Why does the refund window reject orders after 30 days?", "shop/orders_more.py")
        text = comp.compress(ask, "openai").body["messages"][0]["content"]
        assert "def test_refund_window" not in text
        ask = paste(shop_ws, "Which test covers the refund window?", "shop/orders_more.py")
        text = comp.compress(ask, "openai").body["messages"][0]["content"]
        assert "def test_refund_window" in text
    finally:
        path.unlink()
        shop_ws.index()


# -- agent conversations ----------------------------------------------------------------


class Agent:
    """Builds an Anthropic conversation the way a coding agent does, one tool call per request."""

    def __init__(self, ws, task):
        self.ws = ws
        self.messages = [{"role": "user", "content": [{"type": "text", "text": task}]}]
        self.n = 0

    def read(self, path, text=None):
        self.n += 1
        tid = f"toolu_{self.n:02d}"
        self.messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Let me look at {path}."},
            {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": str(self.ws.root / path)}}]})
        self.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": cat_n(text or read(self.ws, path), arrow=True)}]})
        return self.body()

    def say(self, answer, follow_up):
        self.messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
        self.messages.append({"role": "user", "content": [{"type": "text", "text": follow_up}]})
        return self.body()

    def body(self):
        return {"model": "claude-model-for-tests", "max_tokens": 512, "system": "You are a coding agent.",
                "messages": copy.deepcopy(self.messages)}


def result_text(msg):
    return msg["content"][0]["content"]


def whole(msg):
    """``msg`` as the proxy forwards it when it cuts nothing: numbered reads without their numbers' padding."""
    if not isinstance(msg.get("content"), list):
        return msg
    return {**msg, "content": [{**part, "content": unpad_gutter(part["content"])}
                               if part.get("type") == "tool_result" and isinstance(part.get("content"), str) else part
                               for part in msg["content"]]}


@pytest.mark.parametrize("settings", [CUT, AGENT], ids=["no-compaction", "compaction"])
def test_repeated_read_is_deduplicated(shop_ws, settings):
    comp = Compressor(shop_ws, settings)
    agent = Agent(shop_ws, QUESTION)
    agent.read("shop/orders.py")
    agent.read("shop/pricing.py")
    body = agent.read("shop/orders.py")  # the same file again, unchanged
    res = comp.compress(body, "anthropic")
    msgs = forwarded(res, body)
    # the first copy stays whole: the pointer stands for it (even when older results are compacted)
    assert result_text(msgs[2]) == unpad_gutter(result_text(body["messages"][2]))
    pointer = result_text(msgs[6])
    assert pointer.startswith("[memstrata: the same text as the earlier read of ") and "toolu_01" in pointer
    assert msgs[6]["content"][0]["tool_use_id"] == "toolu_03"


@pytest.mark.parametrize("settings", [CUT, AGENT], ids=["no-compaction", "compaction"])
def test_a_reread_shorter_than_its_pointer_goes_whole(shop_ws, settings):
    # A four-line file read twice: the pointer that would stand for it is longer than the file.
    comp = Compressor(shop_ws, settings)
    agent = Agent(shop_ws, QUESTION)
    main = 'import shop\n\nif __name__ == "__main__":\n    shop.main()\n'
    agent.read("shop/__main__.py", main)
    agent.read("shop/pricing.py")
    body = agent.read("shop/__main__.py", main)
    res = comp.compress(body, "anthropic")
    assert result_text(forwarded(res, body)[6]) == unpad_gutter(result_text(body["messages"][6]))


def test_a_rewritten_reread_makes_the_earlier_copy_a_pointer_at_compaction(shop_ws):
    comp = Compressor(shop_ws, CompressionSettings.for_mode("safe", min_tokens=400, trigger=2000,
                                                             clear_at_least=1000, keep_tool_uses=3))
    agent = Agent(shop_ws, QUESTION)
    agent.read("shop/orders.py")
    # changed every few lines: no long run is left in common, so the re-read is forwarded whole
    lines = read(shop_ws, "shop/orders.py").replace("timedelta(days=30)", "timedelta(days=45)").split("\n")
    edited = "\n".join(ln + "  # reviewed" if k % 6 == 0 and ln.strip() else ln for k, ln in enumerate(lines))
    body = agent.read("shop/orders.py", edited)
    res = comp.compress(body, "anthropic")
    msgs = forwarded(res, body)
    earlier = result_text(msgs[2])
    assert earlier.startswith("[memstrata: ") and "read again later (tool use toolu_02)" in earlier
    assert "timedelta(days=45)" in result_text(msgs[4])


def expand_pointers(form: str, earlier: str) -> str:
    """The re-read as the reader reconstructs it: each pointer line replaced by the earlier read's lines."""
    numbered = {int(ln.split("→", 1)[0]): ln.split("→", 1)[1] for ln in earlier.split("\n")}
    out = []
    for ln in form.split("\n"):
        m = re.match(r"\s*\[memstrata: lines (\d+)-(\d+) are lines (\d+)-(\d+) of the earlier read of .* \(tool use "
                     r"toolu_01\), unchanged\]$", ln)
        if m is None:
            out.append(ln)
            continue
        a, b, c, d = map(int, m.groups())
        assert b - a == d - c
        out.extend(f"{a + k}→{numbered[c + k]}" for k in range(b - a + 1))
    return "\n".join(out)


@pytest.mark.parametrize("settings", [CUT, AGENT], ids=["no-compaction", "compaction"])
def test_an_edited_reread_points_at_the_lines_the_earlier_read_holds(shop_ws, settings):
    """A file read again after an edit: the runs it shares with the earlier read (still forwarded
    whole) become pointers to those lines; the changed definition stays whole; nothing is lost."""
    comp = Compressor(shop_ws, settings)
    agent = Agent(shop_ws, QUESTION)
    agent.read("shop/orders.py")
    agent.read("shop/pricing.py")
    original = read(shop_ws, "shop/orders.py")
    edited = original.replace('        self.state = "refunded"\n',
                              '        self.state = "refunded"\n        self.refunded_at = now\n')
    assert edited != original
    body = agent.read("shop/orders.py", edited)
    res = comp.compress(body, "anthropic")
    msgs = forwarded(res, body)
    earlier = result_text(msgs[2])
    assert earlier == unpad_gutter(result_text(body["messages"][2]))  # whole: the pointers need it
    form = result_text(msgs[6])
    assert len(form) < 0.5 * len(cat_n(edited, arrow=True))
    assert expand_pointers(form, earlier) == unpad_gutter(cat_n(edited, arrow=True))  # lossless
    refund = edited.split("\n")[140:150]  # Order.refund as edited, every line in the re-read itself
    shown = [ln.split("→", 1)[1] for ln in form.split("\n") if "→" in ln]
    assert all(ln in shown for ln in refund if ln.strip())
    # a later request forwards the same forms (prefix stability)
    later = comp.compress(agent.read("shop/inventory.py"), "anthropic")
    assert result_text(forwarded(later, agent.body())[6]) == form


def test_matching_runs_are_exact_in_order_and_cover_what_did_not_change(shop_ws):
    a = read(shop_ws, "shop/orders.py").split("\n")
    b = list(a)
    del b[30:33]                                  # lines removed ...
    b[100:100] = ["    # a new comment", ""]     # ... added ...
    b[150] = b[150] + "  # and changed"           # ... and edited
    runs = matching_runs(a, b)
    assert all(a[i:i + n] == b[j:j + n] for i, j, n in runs)
    assert all(i + n <= i2 and j + n <= j2 for (i, j, n), (i2, j2, _) in zip(runs, runs[1:]))
    assert sum(n for _, _, n in runs) >= len(b) - 3   # everything but the new and the edited lines
    # lines repeated everywhere (blank lines, closing braces) anchor nothing: no runs, not a slow search
    assert matching_runs(["}", ""] * 3000, ["}", ""] * 2999 + ["x"]) == []


def test_ten_turn_transcript_keeps_its_prefix_except_at_compaction_steps(shop_ws):
    comp = Compressor(shop_ws, AGENT)
    agent = Agent(shop_ws, QUESTION)
    files = ["shop/orders.py", "shop/pricing.py", "shop/inventory.py", "shop/shipping.py", "shop/__init__.py"]
    steps = []
    for turn in range(10):
        body = agent.read(files[turn % len(files)]) if turn % 3 != 2 else agent.say(
            "Noted: Order.refund checks REFUND_WINDOW.", f"Also check the case in turn {turn}.")
        res = comp.compress(body, "anthropic")
        steps.append((body, forwarded(res, body), res))
    compactions = 0
    for (_, prev, _), (body, now, res) in zip(steps, steps[1:]):
        if res.compaction:
            compactions += 1
            assert now[:len(prev)] != prev and res.prefix_invalidated_tokens > 0
            # only earlier tool results changed, each into a shorter form with a marker
            for old, new in zip(prev, now):
                if old != new:
                    assert old["role"] == "user" and old["content"][0]["type"] == "tool_result"
                    assert "[memstrata:" in result_text(new) and len(result_text(new)) < len(result_text(old))
        else:
            assert now[:len(prev)] == prev, "the forwarded prefix changed without a compaction step"
            assert res.prefix_invalidated_tokens == 0
    assert 1 <= compactions <= 3  # rare, worthwhile steps
    assert all(r.conversation == steps[0][2].conversation for _, _, r in steps)
    # The agent wrote absolute paths; the ledger gets the project's own, as the index names them.
    cut = [r for _, _, r in steps if r.sources]
    assert cut and all(set(r.sources) <= set(files) for r in cut)
    assert all(sym.split("::", 1)[0] in files for r in cut for sym in r.slice_symbols)
    # The task's own words and the latest tool result are never cut.
    final = steps[-1][1]
    assert final[0] == steps[-1][0]["messages"][0]


def test_a_restart_forwards_the_same_forms(shop_ws):
    """A fresh proxy (after a restart, or an evicted conversation) reproduces what was forwarded."""
    running = Compressor(shop_ws, AGENT)
    agent = Agent(shop_ws, QUESTION)
    for path in ["shop/orders.py", "shop/pricing.py", "shop/inventory.py", "shop/orders.py", "shop/shipping.py"]:
        body = agent.read(path)
        last = running.compress(body, "anthropic")
    assert last.body is not None
    fresh = Compressor(shop_ws, AGENT).compress(body, "anthropic")
    assert forwarded(fresh, body) == forwarded(last, body)
    assert not fresh.compaction  # nothing was forwarded before in that process


def test_cache_control_stays_where_the_client_puts_it(shop_ws):
    comp = Compressor(shop_ws, AGENT)
    agent = Agent(shop_ws, QUESTION)
    mark = {"type": "ephemeral"}
    previous = None
    for path in ["shop/orders.py", "shop/pricing.py", "shop/inventory.py", "shop/shipping.py", "shop/orders.py"]:
        body = agent.read(path)
        # as Claude Code does: the marker sits on the newest message only
        # as Claude Code does: markers on the system prompt and the newest message, which move every
        # turn; and one that stays on the first tool result
        body["system"] = [{"type": "text", "text": "You are a coding agent.", "cache_control": mark}]
        body["messages"][-1]["content"][0]["cache_control"] = mark
        for fixed in (2, 4):
            if fixed < len(body["messages"]):
                body["messages"][fixed]["content"][0]["cache_control"] = mark
        res = comp.compress(body, "anthropic")
        msgs = forwarded(res, body)
        marked = [i for i, m in enumerate(msgs) for part in m["content"] if "cache_control" in part]
        assert marked == sorted({2, 4, len(msgs) - 1} & set(range(len(msgs))))
        assert (res.body or body)["system"] == body["system"]
        if previous is not None and not res.compaction:
            strip = lambda ms: [{**m, "content": [{k: v for k, v in p.items() if k != "cache_control"}
                                                  for p in m["content"]]} for m in ms]
            assert strip(msgs[:len(previous)]) == strip(previous)
        previous = msgs
    # A step behind the first marker compacted the second marked result: its marker is kept.
    second = msgs[4]["content"][0]
    assert second["cache_control"] == mark and "[memstrata:" in second["content"]


def test_openai_tool_messages(shop_ws):
    comp = Compressor(shop_ws, AGENT)
    msgs = [{"role": "system", "content": "Agent."}, {"role": "user", "content": QUESTION}]
    for n, path in enumerate(["shop/orders.py", "shop/pricing.py", "shop/inventory.py", "shop/shipping.py"]):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "{path}"}}'}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{n}", "content": read(shop_ws, path)})
    body = {"model": "gpt-4o", "messages": msgs}
    res = comp.compress(body, "openai")
    out = forwarded(res, body)
    assert res.changed and out[:2] == msgs[:2]
    assert out[3]["role"] == "tool" and out[3]["tool_call_id"] == "call_0" and "[memstrata:" in out[3]["content"]
    assert source_of(shop_ws, "shop/orders.py", "def refund(") in out[3]["content"]
    assert out[-1] == msgs[-1]  # the latest result: whole


def test_off_mode_names_the_conversation_and_changes_nothing(shop_ws):
    body = paste(shop_ws, QUESTION, "shop/orders.py")
    res = Compressor(shop_ws, CompressionSettings.for_mode("off")).compress(body, "openai")
    assert res.body is None and res.mode == "off" and res.conversation


def test_concurrent_conversations_match_sequential_ones(shop_ws):
    def conversation(k):
        agent = Agent(shop_ws, f"{QUESTION} (agent {k})")
        bodies = []
        for path in ["shop/orders.py", "shop/pricing.py", "shop/inventory.py", "shop/orders.py"][: 2 + k % 3]:
            bodies.append(agent.read(path))
        return bodies

    conversations = [conversation(k) for k in range(12)]
    sequential = Compressor(shop_ws, AGENT)
    expected = [[forwarded(sequential.compress(b, "anthropic"), b) for b in bodies] for bodies in conversations]
    shared = Compressor(shop_ws, AGENT)
    errors = []
    lock = threading.Lock()
    got = {}

    def run(k):
        try:
            # every conversation sent twice at once: readers of one conversation take turns
            for b in conversations[k]:
                got[(k, id(b))] = forwarded(shared.compress(b, "anthropic"), b)
        except Exception as exc:  # pragma: no cover - reported below
            with lock:
                errors.append(exc)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(run, list(range(12)) * 2))
    assert not errors
    for k, bodies in enumerate(conversations):
        for b, want in zip(bodies, expected[k]):
            assert got[(k, id(b))] == want


def test_conversation_state_is_bounded(shop_ws):
    store = ConversationStore(max_conversations=3)
    comp = Compressor(shop_ws, AGENT, store=store)
    for k in range(6):
        comp.compress(Agent(shop_ws, f"task {k}: {QUESTION}").read("shop/orders.py"), "anthropic")
    assert len(store) <= 3
    small = ConversationStore(max_bytes=2000)
    comp = Compressor(shop_ws, CompressionSettings.for_mode("aggressive", min_tokens=400), store=small)
    for k in range(4):
        comp.compress(Agent(shop_ws, f"task {k}: {QUESTION}").read("shop/orders.py"), "anthropic")
    assert small.total_bytes() <= 2000 or len(small) <= 1


@pytest.mark.parametrize("arrow", [False, True])
def test_cat_n_prefixes_stay_on_kept_lines(shop_ws, arrow):
    agent = Agent(shop_ws, QUESTION)
    agent.messages.append({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_x", "name": "Read", "input": {"file_path": "shop/orders.py"}}]})
    agent.messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_x", "content": cat_n(read(shop_ws, "shop/orders.py"), arrow)}]})
    body = agent.body()
    res = Compressor(shop_ws, CompressionSettings.for_mode("aggressive", min_tokens=400)).compress(body, "anthropic")
    text = result_text(forwarded(res, body)[-1])
    numbered = cat_n(read(shop_ws, "shop/orders.py"), arrow).split("\n")
    refund = next(i for i, ln in enumerate(numbered) if "def refund(" in ln)
    # kept lines keep their numbers and code (the numbers' padding goes)
    assert "\n".join(ln.lstrip(" ") for ln in numbered[refund:refund + 8]) in text
    assert "   141" not in text and "\n141" + ("→" if arrow else "\t") in text


def test_aggressive_keeps_a_read_of_the_file_the_question_is_probably_about(shop_ws):
    """Aggressive cuts new results on arrival, but not the read of a file the project ranking says
    the question is probably about (the question names none of its definitions here): that is
    where the code the task needs is.  A read of a file it is not about is still cut."""
    task = "the refund window is off by one day for orders shipped at midnight"
    orders, shipping = cat_n(read(shop_ws, "shop/orders.py"), arrow=True), cat_n(read(shop_ws, "shop/shipping.py"),
                                                                                arrow=True)
    for likely_file, orders_whole in ((0.3, True), (0.0, False)):
        agent = Agent(shop_ws, task)
        agent.read("shop/shipping.py")
        body = agent.read("shop/orders.py")
        # result_cap 0: every result over min_tokens is cut on arrival, so the fixture's small ones are
        settings = CompressionSettings.for_mode("aggressive", min_tokens=400, result_cap=0, likely_file=likely_file)
        res = Compressor(shop_ws, settings).compress(body, "anthropic")
        sent = forwarded(res, body)
        shipping_sent, orders_sent = sent[2]["content"][0]["content"], sent[4]["content"][0]["content"]
        assert "[memstrata:" in shipping_sent and len(shipping_sent) < len(shipping)
        assert (orders_sent == unpad_gutter(orders)) is orders_whole


def test_a_read_of_a_file_the_question_names_is_likely(shop_ws):
    """A question that writes out a file's name ("... in orders.py") or says its module's name as a
    word (a commit scope, "the order ...") says where the task's code is, whatever the ranking makes
    of its other words: the read of that file stays whole up to the likely-file limit (the ranking's
    threshold is set out of its reach here), while the same read is cut for the same question
    without the name, or naming another file."""
    orders = cat_n(read(shop_ws, "shop/orders.py"), arrow=True)
    for task, whole in (("the refund window is off by one day in orders.py", True),
                        ("fix(orders): the refund window is off by one day", True),
                        ("the refund window of an order is off by one day", True),
                        ("the refund window is off by one day for purchases shipped at midnight", False),
                        ("the refund window is off by one day in shipping.py", False),
                        ("fix(shipping): the refund window is off by one day", False),
                        ("the refund window is off by one day in reorders_queue", False)):
        body = Agent(shop_ws, task).read("shop/orders.py")
        settings = CompressionSettings.for_mode("aggressive", min_tokens=100, result_cap=200, likely_file=0.999)
        sent = forwarded(Compressor(shop_ws, settings).compress(body, "anthropic"), body)[-1]["content"][0]["content"]
        assert (sent == unpad_gutter(orders)) is whole
        assert whole or "[memstrata:" in sent


def test_a_long_request_keeps_its_opening_as_the_question(shop_ws):
    """A long request (a pull request's description with its benchmark logs) says what it is about
    at the start, not only at the end: the file its title names is still the likely file."""
    log = "\n".join(f"BenchmarkRoute{k}-8   {1000 + k} ns/op   {k % 7} allocs/op" for k in range(200))
    assert len(log) > 4 * QUESTION_CHARS
    orders = cat_n(read(shop_ws, "shop/orders.py"), arrow=True)
    for title, whole in (("perf: the refund window in orders.py allocates too much", True),
                         ("perf: the refund window allocates too much", False)):
        body = Agent(shop_ws, f"{title}\n\n{log}\n\nThe numbers are from a laptop, so expect noise.").read(
            "shop/orders.py")
        settings = CompressionSettings.for_mode("aggressive", min_tokens=100, result_cap=200, likely_file=0.999)
        sent = forwarded(Compressor(shop_ws, settings).compress(body, "anthropic"), body)[-1]["content"][0]["content"]
        assert (sent == unpad_gutter(orders)) is whole


def test_safe_keeps_a_likely_read_over_the_whole_result_limit(shop_ws):
    """Safe keeps the current task's reads whole up to the whole-result limit; the read of a file the
    project ranking says the question is probably about stays whole up to the larger ``likely_cap``
    (cut around what the task points at, the code it needs is too often in the part cut away), and
    past that it is cut to about that size."""
    task = "the refund window is off by one day for orders shipped at midnight"
    orders = cat_n(read(shop_ws, "shop/orders.py"), arrow=True)
    for likely_file, likely_cap, whole in ((0.3, 100_000, True), (0.0, 100_000, False), (0.3, 1_000, False)):
        agent = Agent(shop_ws, task)
        body = agent.read("shop/orders.py")
        settings = CompressionSettings.for_mode("safe", min_tokens=200, result_cap=300, likely_cap=likely_cap,
                                                likely_file=likely_file)
        res = Compressor(shop_ws, settings).compress(body, "anthropic")
        sent = forwarded(res, body)[-1]["content"][0]["content"]
        assert (sent == unpad_gutter(orders)) is whole
        if not whole:
            assert "[memstrata:" in sent and "def refund(" in sent


def test_aggressive_keeps_the_likely_read_through_a_follow_up(shop_ws):
    """A read aggressive kept whole because the question is probably about its file stays whole when
    the user follows up before the agent reads anything else (an answer drawn from it still has it):
    the second request starts with exactly what the first forwarded."""
    settings = CompressionSettings.for_mode("aggressive", min_tokens=400, trigger=1000, clear_at_least=300)
    comp = Compressor(shop_ws, settings)
    agent = Agent(shop_ws, "Order.refund and shipping_cost disagree about orders shipped abroad")
    agent.read("shop/shipping.py")
    first = agent.read("shop/orders.py")
    sent = forwarded(comp.compress(first, "anthropic"), first)
    for k, path in ((2, "shop/shipping.py"), (4, "shop/orders.py")):  # both files are named: both likely
        assert sent[k]["content"][0]["content"] == unpad_gutter(cat_n(read(shop_ws, path), arrow=True))
    second = agent.say("The window check compares dates in the wrong zone.", "Thanks. Now write the fix as a diff.")
    res = comp.compress(second, "anthropic")
    assert not res.compaction and forwarded(res, second)[:len(sent)] == sent
