"""Background work that gives way to questions.

A server does work of its own after start-up (the full graph built behind
the snapshot, whole-file token counts, warming file texts).  It is Python
under the one interpreter lock the questions need too: run side by side, a
40 ms question took 400-900 ms while the graph was built.  Background loops
here call :meth:`QuestionGate.wait_quiet` between short steps; it returns at
once when no question is being answered, else when the last one ends
(bounded, so that a steady stream of questions slows the work down but
cannot stop it).

What such work builds to keep (the full graph: millions of objects) is
frozen out of the garbage collector's way as it goes
(:meth:`QuestionGate.wait_quiet_and_settle`): left in the collected
generations, every full collection walked it, a 150-300 ms pause landing on
whichever question happened to trigger it.  What the questions themselves
leave behind to keep (adjacency lists, file texts, token counts: caches that
grow with every new corner of the graph a question walks) is settled the
same way when the last question being answered ends: one collection of what
is not frozen yet (what the questions since the last one kept, a fraction
of a millisecond), then a freeze.  Left to the collector's own schedule,
those caches made a full collection every thirty questions or so, 13-32 ms
each on a 750k-line project, that freed nothing and landed on a question.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

MAX_WAIT_S = 2.0  # the longest one step of background work waits for the questions to stop


class QuestionGate:
    def __init__(self, max_wait: float = MAX_WAIT_S):
        self.max_wait = max_wait
        self._answering = 0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Held while one question is answered."""
        with self._cond:
            self._answering += 1
        try:
            yield
        finally:
            with self._cond:
                self._answering -= 1
                if not self._answering:
                    self._cond.notify_all()
                    settle()

    def wait_quiet(self) -> None:
        """Return when no question is being answered, or after ``max_wait`` seconds."""
        with self._cond:
            if self._answering:
                self._cond.wait_for(lambda: not self._answering, timeout=self.max_wait)

    def wait_quiet_and_settle(self) -> None:
        """:meth:`wait_quiet`, then freeze every object alive now (see the module docstring).

        Only for work whose objects live on: a frozen object is never
        collected, so cyclic garbage alive at that moment stays.  Called when
        no question runs, that garbage is the background work's own, a few
        temporaries per step.
        """
        self.wait_quiet()
        gc.freeze()


def settle() -> None:
    """Collect what is not frozen yet, then freeze what survives.

    Cyclic garbage is collected before the freeze; what is frozen is left to
    reference counting alone, so a cycle made of frozen objects that later
    becomes garbage stays (none was seen: these collections free nothing)."""
    gc.collect()
    gc.freeze()


__all__ = ["QuestionGate", "MAX_WAIT_S", "settle"]
