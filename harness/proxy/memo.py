"""A bounded memo shared by the proxy's per-request caches.

Agents resend their whole conversation every turn, so the proxy remembers what
it computed from a text, a message or a tool definition by that value's exact
form (token counts, digests).  Each of those memos holds at most so many
entries and so much of the values it is keyed by; the least recently used
entries go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class SizedLRU:
    """A thread-safe memo bounded by its entries and by the total of the sizes its caller gives
    them (``max_entries`` None: by size alone).  An entry larger than ``max_size`` is never kept."""

    def __init__(self, max_entries: int | None, max_size: int):
        self._d: OrderedDict = OrderedDict()   # key -> (value, size)
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.max_size = max_size
        self.size = 0

    def get(self, key):
        """The value remembered for ``key`` (now the most recently used), or None."""
        with self._lock:
            hit = self._d.get(key)
            if hit is None:
                return None
            self._d.move_to_end(key)
            return hit[0]

    def put(self, key, value, size: int) -> None:
        """Remember ``value`` for ``key`` unless it is there already or ``size`` is over the bound."""
        if size > self.max_size:
            return
        with self._lock:
            if key in self._d:
                return
            self._d[key] = (value, size)
            self.size += size
            while self.size > self.max_size or (self.max_entries is not None and len(self._d) > self.max_entries):
                _, (_, old) = self._d.popitem(last=False)
                self.size -= old

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key) -> bool:
        return key in self._d

    def __iter__(self):
        with self._lock:
            return iter(list(self._d))
