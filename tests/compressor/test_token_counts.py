"""Token counts: what the faster ordinary encoding gives is the full encoder's count."""

from __future__ import annotations

from pathlib import Path

from memstrata.compressor import tokens

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
