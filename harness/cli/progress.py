"""A progress bar on stderr: files, rate and ETA; quiet lines when not a TTY."""

from __future__ import annotations

import sys
import time

from memstrata.indexer.run import Progress


class ProgressBar:
    def __init__(self, label: str = "indexing", stream=None, width: int = 28):
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self._last_draw = 0.0
        self._last_pct = -1
        self._drawn = False

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if p.total <= 0:
            return
        elapsed = max(now - self.start, 1e-6)
        rate = p.done / elapsed
        eta = (p.total - p.done) / rate if rate > 0 else 0.0
        if self.tty:
            if now - self._last_draw < 0.1 and p.done < p.total:
                return
            self._last_draw = now
            filled = int(self.width * p.done / p.total)
            bar = "#" * filled + "." * (self.width - filled)
            line = f"\r{self.label} [{bar}] {p.done}/{p.total} files  {rate:,.0f} files/s  ETA {eta:,.0f}s "
            self.stream.write(line)
            self.stream.flush()
            self._drawn = True
        else:
            pct = 100 * p.done // p.total
            if pct // 25 > self._last_pct // 25 or p.done == p.total:
                self._last_pct = pct
                self.stream.write(f"{self.label}: {p.done}/{p.total} files ({pct}%), {rate:,.0f} files/s, ETA {eta:,.0f}s\n")
                self.stream.flush()

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
