"""cl100k counts of the texts the proxy sees, remembered by exact text for the whole process.

An agent resends its whole conversation on every turn, and the proxy counts
each request's texts up to four times: the compressor (the pieces and
messages it forwards), the ledger (the request as sent and as forwarded) and
the counterfactual bill (block by block).  One bounded memo serves all of
them, so a text is encoded once however often and by whom it is counted;
short texts (a tool call's input, "Let me read x.py") are remembered too,
since a request carries dozens of them and encoding each costs far more than
looking it up.

Keyed by the text itself, never by a hash of it: a count is a ledger figure.
Least recently used texts go first once ``max_chars`` of text or
``max_entries`` texts are held.
"""

from __future__ import annotations

from memstrata.compressor.tokens import count_tokens

from .gutter import unpad_gutter_counted
from .memo import SizedLRU

MAX_CHARS = 32_000_000     # about 130 agent requests of 250 KB, every text distinct
MAX_ENTRIES = 200_000


class TextCounts:
    def __init__(self, max_chars: int = MAX_CHARS, max_entries: int = MAX_ENTRIES):
        self._d = SizedLRU(max_entries, max_chars)
        self.max_chars = max_chars
        self.max_entries = max_entries

    @property
    def chars(self) -> int:
        """Characters of the texts held."""
        return self._d.size

    def count(self, text: str) -> int:
        if not text:
            return 0
        n = self._d.get(text)
        if n is None:
            n = self._encoded(text)
            self._d.put(text, n, len(text))
        return n

    def _encoded(self, text: str) -> int:
        """The count of a text not remembered.  A numbered read (most of what an agent sends) is
        encoded without its numbers' padding, about a quarter faster, and the padding's tokens
        added (exact: see .gutter).  (The compressor remembers the unpadded text's count when it
        forwards it; kept here as well, it would take memo room from an uncompressed serve.)
        Encoding happens outside the memo's lock and releases the GIL, so other threads keep
        counting."""
        if "\t" in text or "→" in text:
            bare, padding = unpad_gutter_counted(text)
            if padding:
                n = self._d.get(bare)
                return (count_tokens(bare) if n is None else n) + padding
        return count_tokens(text)

    def remember(self, text: str, n: int) -> None:
        """Keep ``n`` as the count of ``text``: for a count worked out exactly without encoding
        (harness/proxy/gutter.py)."""
        if text and self._d.get(text) is None:
            self._d.put(text, n, len(text))

    def __len__(self) -> int:
        return len(self._d)


shared = TextCounts()
count = shared.count
