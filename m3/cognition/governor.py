"""The loop's governor: whether a tick of the cognitive loop should run now or wait (docs/cognitive-loop.md).

Pure logic over two injectable probes: the number of requests the Writer has handled so far (a counter that
only grows) and the machine's load per core. A tick is deferred while agents write heavily (the Writer's rate
since the previous check above ``max_writes_per_s``) or while the machine is busy (load per core above
``max_load``). A limit of 0 or below turns its check off. ``loop_run_once`` does not ask the governor.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass


def load_per_core() -> float:
    """The one-minute load average divided by the number of cores (0 where the OS has no load average)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 0.0
    return load / (os.cpu_count() or 1)


@dataclass(frozen=True)
class Verdict:
    """The governor's answer: run (``reason`` None) or defer, with why and the figures it judged by."""

    reason: str | None
    writes_per_s: float
    load: float

    @property
    def run(self) -> bool:
        return self.reason is None


class Governor:
    """Judges ticks; :meth:`check` also starts the next window of the write rate, :meth:`peek` does not.

    ``writes()`` is the Writer's running count of handled requests, ``own()`` the part of it this loop itself
    sent (subtracted: the loop's own commits never defer it), ``load()`` the load per core and ``clock()``
    monotonic seconds. One instance belongs to one actor (not thread-safe).
    """

    def __init__(self, *, max_writes_per_s: float, max_load: float, writes: Callable[[], int],
                 load: Callable[[], float] = load_per_core, own: Callable[[], int] = lambda: 0,
                 clock: Callable[[], float] = time.monotonic):
        self.max_writes_per_s = max_writes_per_s
        self.max_load = max_load
        self._writes, self._own, self._load, self._clock = writes, own, load, clock
        self._since = (self._clock(), self._others())

    def _others(self) -> int:
        return self._writes() - self._own()

    def peek(self) -> Verdict:
        """The verdict now, over the write rate since the last :meth:`check` (or since the governor started)."""
        at, count = self._clock(), self._others()
        then, before = self._since
        rate = (count - before) / (at - then) if at > then else 0.0
        load = self._load()
        if self.max_writes_per_s > 0 and rate > self.max_writes_per_s:
            return Verdict(f"agents are writing {rate:.1f} requests/s (loop.governor.max_writes_per_s = "
                           f"{self.max_writes_per_s:g})", rate, load)
        if self.max_load > 0 and load > self.max_load:
            return Verdict(f"the machine is busy: load {load:.2f} per core (loop.governor.max_load = "
                           f"{self.max_load:g})", rate, load)
        return Verdict(None, rate, load)

    def check(self) -> Verdict:
        """The verdict now; the next write rate is measured from here."""
        verdict = self.peek()
        self._since = (self._clock(), self._others())
        return verdict
