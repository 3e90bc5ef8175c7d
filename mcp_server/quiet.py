"""Background work that gives way to questions.

A server does work of its own after start-up (the full graph built behind
the snapshot, whole-file token counts, warming file texts).  It is Python
under the one interpreter lock the questions need too: run side by side, a
40 ms question took 400-900 ms while the graph was built.  Background loops
here call :meth:`QuestionGate.wait_quiet` between steps of a few
milliseconds; it returns once no question has been answered for a moment
(bounded, so that a steady stream of questions slows the work down but
cannot stop it).  Returning as soon as the last answer ended was not
enough: a client asks its next question a few milliseconds after an
answer, found a step already running (some took half a second) and shared
the interpreter with it.  A fresh server on sympy, 200 questions one after
the other: p95 145-197 ms while the full graph was built behind them, 53-60
ms with short steps that wait for a moment of silence.  An agent that is
reading or thinking leaves its server alone for seconds.

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
import time
from collections.abc import Callable, Iterator

MAX_WAIT_S = 2.0  # the longest one step of background work waits for the questions to stop
QUIET_S = 0.1  # how long no question must have been answered before a step starts
YIELD_S = 0.0002  # how long a step lets go of the interpreter before the next one


class QuestionGate:
    def __init__(self, max_wait: float = MAX_WAIT_S, quiet: float | None = None):
        self.max_wait = max_wait
        self.quiet = QUIET_S if quiet is None else quiet
        self._answering = 0
        self._last_end = float("-inf")  # when the last answer ended (monotonic seconds)
        self._cond = threading.Condition()
        # Told when the first question starts being answered and when the last one ends: work
        # outside this interpreter (a child process) gives way through them (see follow()).
        self._busy: list[Callable[[], None]] = []
        self._idle: list[Callable[[], None]] = []

    def follow(self, busy: Callable[[], None], idle: Callable[[], None]) -> None:
        """Call ``busy`` when a question starts being answered with none answered before, and
        ``idle`` when the last one being answered ends: for background work in another process,
        which cannot wait on this gate.  Both are called with the gate's lock held: they must
        return at once (write a byte to a pipe, set a flag)."""
        with self._cond:
            self._busy.append(busy)
            self._idle.append(idle)

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Held while one question is answered."""
        with self._cond:
            self._answering += 1
            if self._answering == 1:
                for busy in self._busy:
                    busy()
        try:
            yield
        finally:
            with self._cond:
                self._answering -= 1
                if not self._answering:
                    self._last_end = time.monotonic()
                    self._cond.notify_all()
                    for idle in self._idle:
                        idle()
                    settle()

    def wait_quiet(self) -> None:
        """Return when no question has been answered for ``quiet`` seconds, or after ``max_wait``.

        It always lets go of the interpreter for a moment first: a question
        that has just arrived is then read and started at once, where it
        would otherwise wait for the interpreter's switch interval (5 ms)
        at every thread it passes through before it counts as answered."""
        time.sleep(YIELD_S)
        deadline = time.monotonic() + self.max_wait
        with self._cond:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    return
                if self._answering:
                    self._cond.wait(deadline - now)
                    continue
                silent = now - self._last_end
                if silent >= self.quiet:
                    return
                self._cond.wait(min(self.quiet - silent, deadline - now))

    def wait_unanswered(self) -> None:
        """Return as soon as no question is being answered, or after ``max_wait``.

        For steps that hold the interpreter for almost none of their time (encoding
        text: tiktoken lets go of the lock) and take a few milliseconds each: a question
        that arrives during one shares a core with the rest of that step, never the
        interpreter, so the moment of silence :meth:`wait_quiet` waits for, which keeps a
        question from meeting a long Python step, would only leave the server's idle
        moments unused (a client asking back to back leaves tens of milliseconds between
        an answer and its next question, never a tenth of a second)."""
        time.sleep(YIELD_S)
        deadline = time.monotonic() + self.max_wait
        with self._cond:
            while self._answering:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

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


__all__ = ["QuestionGate", "MAX_WAIT_S", "QUIET_S", "YIELD_S", "settle"]
