"""Token counts: what the faster ordinary encoding gives is the full encoder's count, a
joined slice costs exactly the sum of its sections, and a text the sum of its lines."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.compressor import tokens
from memstrata.compressor.render import join_sections, joined_tokens

REPO = Path(__file__).resolve().parents[2]


def _samples() -> list[str]:
    code = [p.read_text(encoding="utf-8") for p in sorted((REPO / "compressor").glob("*.py"))]
    return [
        *code,
        # Special-token strings are ordinary text in code and chat: counted as such, never as one token.
        "tok = '<|endoftext|>' + \"<|fim_prefix|>\" + '<|fim_middle|><|fim_suffix|><|endofprompt|>'",
        "naïve 日本語 \t\n emoji 🚀 and a lone surrogate \udcff in the middle",
        " " * 5000 + "\n" * 300,
        "x" * 50_000,
    ]


def test_counts_are_the_full_encoders_with_no_special_token_allowed():
    enc = tokens.encoding()
    for text in _samples():
        full = enc.encode(text, disallowed_special=())
        assert tokens.count_tokens(text) == len(full)
        assert tokens.count_tokens_memo(text) == len(full)
    assert tokens.count_tokens("") == 0
    assert tokens.count_tokens("<|endoftext|>") > 1


def test_truncation_keeps_whole_tokens_of_the_full_encoding():
    enc = tokens.encoding()
    for text in _samples():
        full = enc.encode(text, disallowed_special=())
        for limit in (0, 1, 7, len(full) // 2, len(full), len(full) + 3):
            expected = text if len(full) <= limit else enc.decode(full[:limit])
            assert tokens.truncate_to_tokens(text, limit) == expected


# Characters that decide where cl100k splits text into pieces: every kind of
# whitespace it knows (newlines, Unicode spaces), punctuation that absorbs the
# newlines after it, digits it groups by three, letters, contractions.
_PIECES = st.sampled_from(
    ["\n", "\r", "\r\n", "\n\n", " ", "  ", "\t", "\x0b", "\x0c", "\x85", "\u00a0", "\u2028", "\u3000",
     ")", "):", "{", "}", ";", "#", "//", "->", "'s", "'ll", "\"", "0", "1234", "x", "def", "naïve", "日本", "🚀"]
)
_TEXT = st.lists(_PIECES, max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["#", "//", "x", "1", ")", "日"]), _TEXT), min_size=1, max_size=5))
def test_a_join_of_sections_costs_exactly_the_sum_of_its_parts(parts):
    chunks = [first + rest for first, rest in parts]
    assert joined_tokens(chunks, tokens.count_tokens) == tokens.count_tokens(join_sections(chunks))


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=4))
def test_sections_that_start_with_whitespace_or_nothing_are_counted_whole(chunks):
    assert joined_tokens(chunks, tokens.count_tokens) == tokens.count_tokens(join_sections(chunks))


def test_real_sections_cut_anywhere_count_exactly():
    code = [p.read_text(encoding="utf-8") for p in sorted((REPO / "compressor").glob("*.py"))]
    for text in code:
        lines = text.splitlines()
        # Cuts that end sections on code, on punctuation, on blank lines, on indentation.
        for step in (3, 7, 40):
            chunks = [f"# part {i}\n" + "\n".join(lines[i:i + step]) for i in range(0, len(lines), step)]
            assert joined_tokens(chunks) == tokens.count_tokens(join_sections(chunks))
    assert joined_tokens([]) == 0 == tokens.count_tokens(join_sections([]))


@settings(max_examples=600, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=12).map("\n".join))
def test_a_text_costs_exactly_the_sum_of_its_lines(text):
    # Lines of every kind: indented, blank, whitespace of every sort, punctuation that takes the
    # line break after it, CRLF, a line that starts with a contraction or a digit.
    assert tokens.count_tokens_by_lines(text) == tokens.count_tokens(text)


def test_real_files_and_slices_cost_the_sum_of_their_lines():
    texts = [p.read_text(encoding="utf-8") for p in sorted((REPO / "compressor").glob("*.py"))]
    texts += [t.replace("\n", "\r\n") for t in texts[:3]]            # CRLF line endings
    texts += [t.replace("    ", "\t") for t in texts[:3]]              # tab indentation
    texts += [join_sections([f"# {i}\n" + t for i, t in enumerate(texts[:4])])]
    texts += ["\n".join(["", "  ", "x  ", "\t\t", ")", "   ):", "", "'s", "12345", "  \u3000y"] * 40)]
    for text in texts:
        assert tokens.count_tokens_by_lines(text) == tokens.count_tokens(text)
        assert tokens.count_tokens_memo(text) == tokens.count_tokens(text)   # long: counted by its lines


def test_a_cut_after_a_line_break_before_any_character_but_whitespace_counts_exactly():
    """exact_parts cuts after a line break that a character other than (Python's) whitespace
    follows: whatever that character is, cl100k makes no piece across the cut."""
    n = tokens.count_tokens
    lefts = ["x;\n", "  \n", "a\r\n", ":\n\n"]
    for cp in range(0x10000):
        c = chr(cp)
        if c.isspace() or 0xD800 <= cp <= 0xDFFF:
            continue
        for left in lefts:
            assert n(left + c + "y") == n(left) + n(c + "y"), (left, hex(cp))


@settings(max_examples=600, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=12).map("\n".join), st.integers(1, 60))
def test_a_text_cut_into_exact_parts_costs_the_sum_of_its_parts(text, size):
    parts = tokens.exact_parts(text, size)
    assert "".join(parts) == text
    assert all(len(p) >= size for p in parts[:-1])
    assert sum(tokens.count_tokens(p) for p in parts) == tokens.count_tokens(text)


def test_real_files_cut_into_exact_parts_cost_the_sum_of_their_parts():
    texts = [p.read_text(encoding="utf-8") for p in sorted((REPO / "compressor").glob("*.py"))]
    texts += [t.replace("\n", "\r\n") for t in texts[:3]]
    texts += [t.replace("    ", "\t") for t in texts[:3]]
    for text in texts:
        for size in (1, 100, 2_000, 32_000):
            parts = tokens.exact_parts(text, size)
            assert "".join(parts) == text
            assert sum(tokens.count_tokens(p) for p in parts) == tokens.count_tokens(text)
    assert tokens.exact_parts("", 10) == [""]
    assert tokens.exact_parts("    indented only\n    and again\n", 1) == ["    indented only\n    and again\n"]
