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

import threading
from collections import OrderedDict

from memstrata.compressor.tokens import count_tokens

MAX_CHARS = 32_000_000     # about 130 agent requests of 250 KB, every text distinct
MAX_ENTRIES = 200_000


class TextCounts:
    def __init__(self, max_chars: int = MAX_CHARS, max_entries: int = MAX_ENTRIES):
        self._d: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self.max_chars = max_chars
        self.max_entries = max_entries
        self.chars = 0

    def count(self, text: str) -> int:
        if not text:
            return 0
        with self._lock:
            n = self._d.get(text)
            if n is not None:
                self._d.move_to_end(text)
                return n
        n = count_tokens(text)  # outside the lock: encoding releases the GIL, others keep counting
        if len(text) > self.max_chars:
            return n
        with self._lock:
            if text not in self._d:
                self._d[text] = n
                self.chars += len(text)
                while self.chars > self.max_chars or len(self._d) > self.max_entries:
                    old, _ = self._d.popitem(last=False)
                    self.chars -= len(old)
        return n

    def __len__(self) -> int:
        return len(self._d)


shared = TextCounts()
count = shared.count
