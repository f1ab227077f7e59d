"""The cognitive loop's actors: each runs a tuple of passes (:class:`~m3.cognition.passes.LoopPass`) on ticks.

Two run in an :class:`~m3.actors.system.ActorSystem`: ``observer`` (observe, rollup) and ``reflector``
(reflect, decay), each with the passes that are registered and switched on (:mod:`m3.cognition.registry`).
On each tick (every ``loop.interval_s``), unless the governor (:mod:`m3.cognition.governor`) defers it, each
pass that is not paused (``loop_state``) steps once: in a read transaction on the actor's own connection it
reads at most ``loop.budget`` items and decides; its writes go to the Writer as one :class:`CommitPass` (in
order, one transaction, with the watermark). A pass that reports ``more`` is queued again behind the messages
waiting, instead of waiting for the next interval; the ticker is armed once no pass is queued. A pass that
raises is logged and counted (``failed``, ``last_error``) and steps again at the next tick; the actor and the
other passes carry on.

Ticks run only where the background lease is held (``background``, or :class:`TakeBackground` later): in the
engine of a store, never in a one-shot command. ``loop_run_once`` (:class:`RunPassesOnce`) runs the passes
anywhere, at once, whatever the governor says. The ticker and the clock (``ctx.now``) are injectable: tests
fire ticks by hand and never sleep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from m3.actors.entity_indexer import ThreadTicker, Ticker
from m3.actors.reader import ConnectionOwner
from m3.actors.supervisor import ActorHandle
from m3.cognition.governor import Governor, Verdict, load_per_core
from m3.cognition.passes import ChatModel, LoopPass, PassContext
from m3.errors import M3Error
from m3.protocols.base import Message
from m3.protocols.messages import loop as lp
from m3.store import loop_state
from m3.store.engine import StoreOptions

log = logging.getLogger(__name__)


class LoopTick(Message):
    """Time for the next tick (from the ticker)."""


class PassAgain(Message):
    """Pass ``name`` reported more work beyond its budget: step it again (queued behind waiting messages)."""

    name: str


class TakeBackground(Message):
    """From now on this process runs the loop (it took the background lease of a shared store)."""


@dataclass
class Counters:
    """One pass's statistics in this process (the actor's thread writes them)."""

    runs: int = 0
    seen: int = 0
    produced: int = 0
    llm_calls: int = 0
    seconds: float = 0.0
    failed: int = 0
    deferred: int = 0
    last_error: str | None = None
    last_deferred: str | None = None
    last_run: str | None = None


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else (None if value is None else str(value))


class LoopActor(ConnectionOwner):
    """Runs ``passes`` on ticks; answers :class:`RunPassesOnce`, :class:`LoopStatusOf` and :class:`PassStates`.

    ``actor`` is its name (observer, reflector); ``budget`` the ``ctx.budget`` of every step; ``background``
    whether it ticks (else only after :class:`TakeBackground`). The governor's probes: ``writes`` (the Writer's
    handled count), ``load`` (load per core) and ``monotonic`` (seconds); ``clock`` is ``ctx.now``. ``settings``
    maps a pass to its ``ctx.settings``; ``llm`` and ``llm_calls`` are handed to every step (None and 0: no model).
    """

    def __init__(self, options: StoreOptions, *, actor: str, passes: Sequence[LoopPass], writer: ActorHandle,
                 interval_s: float, budget: int, background: bool, ask_timeout: float,
                 max_writes_per_s: float, max_load: float, writes: Callable[[], int],
                 settings: Mapping[str, Mapping[str, Any]] | None = None, load: Callable[[], float] = load_per_core,
                 ticker: Ticker | None = None, clock: Callable[[], datetime] | None = None,
                 monotonic: Callable[[], float] = time.monotonic, llm: ChatModel | None = None, llm_calls: int = 0,
                 **base: Any):
        super().__init__(options, **base)
        self.name = actor
        self._passes = {one.name: one for one in passes}
        self._writer = writer
        self._interval_s = max(0.05, interval_s)
        self._budget = max(1, budget)
        self._background = background
        self._ask_timeout = ask_timeout
        self._settings = settings or {}
        self._ticker: Ticker = ticker or ThreadTicker()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._llm, self._llm_calls = llm, (llm_calls if llm is not None else 0)
        #: CommitPass requests this actor sent: the governor does not count the loop's own writes.
        self._own_writes = 0
        self._governor = Governor(max_writes_per_s=max_writes_per_s, max_load=max_load, writes=writes,
                                  load=load, own=lambda: self._own_writes, clock=monotonic)
        self.counters = {one: Counters() for one in self._passes}
        #: Passes queued again (PassAgain) and not stepped yet: the ticker waits until none is.
        self._queued: set[str] = set()

    def setup(self) -> None:
        super().setup()
        if self._background:
            self._arm()

    def release(self) -> None:
        self._ticker.cancel()
        close = getattr(self._llm, "close", None)
        if close is not None:
            close()  # the chat client's connection pool is this actor's own
        super().release()

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {LoopTick: self._tick, PassAgain: self._again, TakeBackground: self._take_background,
                lp.RunPassesOnce: self._run_once, lp.LoopStatusOf: self._status, lp.PassStates: self._states}

    # -- ticks -------------------------------------------------------------------------------------

    def _arm(self) -> None:
        if self._passes:
            self._ticker.arm(self._interval_s, lambda: self.tell_self(LoopTick()))

    def _take_background(self, _msg: TakeBackground) -> bool:
        if not self._background:
            self._background = True
            self._arm()
        return True

    def _deferred(self, names: Sequence[str], verdict: Verdict) -> None:
        log.info("the %s loop waits: %s", self.name, verdict.reason)
        for name in names:
            self.counters[name].deferred += 1
            self.counters[name].last_deferred = verdict.reason

    def _tick(self, _msg: LoopTick) -> None:
        if not self._background:
            return
        verdict = self._governor.check()
        if not verdict.run:
            self._deferred(list(self._passes), verdict)
        else:
            for name in self._passes:
                self._step_queued(name)
        if not self._queued:
            self._arm()

    def _again(self, msg: PassAgain) -> None:
        self._queued.discard(msg.name)
        if self._background and msg.name in self._passes:
            verdict = self._governor.check()
            if verdict.run:
                self._step_queued(msg.name)
            else:
                self._deferred([msg.name], verdict)
        if not self._queued:
            self._arm()

    def _step_queued(self, name: str) -> None:
        """Step ``name`` once; with more waiting, queue it again behind the messages already waiting."""
        if self._step(name, force=False).more:
            self._queued.add(name)
            self.tell_self(PassAgain(name=name))

    # -- one step of one pass ------------------------------------------------------------------------

    def _step(self, name: str, *, force: bool) -> lp.PassRun:
        """Step pass ``name`` once (a paused one only when ``force``); failures are counted, never raised."""
        one, counts = self._passes[name], self.counters[name]
        begun = time.perf_counter()
        try:
            now = self._clock()
            with self.conn.begin():
                row = loop_state.state(self.conn, name)
                if row is not None and row["paused"] and not force:
                    return lp.PassRun(name=name, ran=False, skipped="paused")
                ctx = PassContext(now=now, budget=self._budget, llm=self._llm, llm_calls=self._llm_calls,
                                  settings=self._settings.get(name, {}))
                step = one.step(self.conn, ctx)
            replies: list[Any] = []
            if step.writes:
                self._own_writes += 1
                replies = self._writer.ask(lp.CommitPass(name=name, writes=tuple(step.writes)), self._ask_timeout)
            produced = one.produced(replies)
        except Exception as exc:  # logged and counted; the pass steps again at the next tick
            took = time.perf_counter() - begun
            counts.runs += 1
            counts.failed += 1
            counts.seconds += took
            counts.last_error = (f"{exc.code}: {exc.message}" if isinstance(exc, M3Error)
                                 else f"{type(exc).__name__}: {exc}")
            counts.last_run = _iso(self._clock())
            log.warning("loop pass %s failed, trying again at the next tick: %r", name, exc)
            return lp.PassRun(name=name, ran=True, seconds=round(took, 6), error=counts.last_error)
        took = time.perf_counter() - begun
        if step.seen > self._budget:
            log.warning("loop pass %s looked at %d items, over its budget of %d", name, step.seen, self._budget)
        counts.runs += 1
        counts.seen += step.seen
        counts.produced += produced
        counts.llm_calls += step.llm_calls
        counts.seconds += took
        counts.last_error = None
        counts.last_run = _iso(now)
        return lp.PassRun(name=name, ran=True, seen=step.seen, produced=produced, llm_calls=step.llm_calls,
                          seconds=round(took, 6), more=step.more)

    # -- requests ------------------------------------------------------------------------------------

    def _run_once(self, ask: lp.RunPassesOnce) -> list[lp.PassRun]:
        if ask.name is not None:
            return [self._step(ask.name, force=True)] if ask.name in self._passes else []
        return [self._step(name, force=False) for name in self._passes]

    def _rows(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        with self.conn.begin():
            found = {name: loop_state.state(self.conn, name) for name in names}
        return {name: row for name, row in found.items() if row is not None}

    def _states(self, ask: lp.PassStates) -> dict[str, dict[str, Any]]:
        return self._rows(ask.names)

    def _status(self, _ask: lp.LoopStatusOf) -> lp.LoopActorStatus:
        rows = self._rows(list(self._passes))
        shown = []
        for name, counts in self.counters.items():
            row = rows.get(name) or {}
            shown.append(lp.PassStatistics(
                name=name, actor=self.name, paused=bool(row.get("paused", False)), watermark=row.get("watermark"),
                state_updated_at=_iso(row.get("updated_at")), last_run=counts.last_run, runs=counts.runs,
                seen=counts.seen, produced=counts.produced, llm_calls=counts.llm_calls,
                seconds=round(counts.seconds, 6), failed=counts.failed, deferred=counts.deferred,
                last_error=counts.last_error, last_deferred=counts.last_deferred))
        verdict = self._governor.peek()  # no new window: asking for the status does not move the rate
        return lp.LoopActorStatus(
            actor=self.name, background=self._background, interval_s=self._interval_s, budget=self._budget,
            passes=tuple(shown), governor=lp.GovernorVerdict(run=verdict.run, reason=verdict.reason,
                                                             writes_per_s=round(verdict.writes_per_s, 3),
                                                             load=round(verdict.load, 3)))
