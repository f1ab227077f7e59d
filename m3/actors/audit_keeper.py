"""The AuditKeeper: collects read-audit records for the Writer, and triggers retention.

The gateway tells it a :class:`~m3.protocols.messages.governance.RecordReads` after each read (nobody waits);
it hands what it collected to the Writer as one :class:`~m3.protocols.messages.governance.RecordAudit`
``AUDIT_DELAY_S`` after the first record, at once when ``BATCH_READS`` are waiting, on :class:`Flush` and when it
stops. So a search costs the Writer no transaction of its own: records join its next group commit, or one
commit for many reads. A Writer or keeper that crashes loses the records not yet handed over (docs/governance.md).

Pruning is a plain store function (:func:`m3.store.audit_writes.prune`) the Writer runs for a
:class:`~m3.protocols.messages.governance.PruneAudit`; with ``periodic`` the keeper asks for it when it starts and
then every ``audit.prune_interval_s``, with the cut-off ``audit.retention_days`` before now. Long-running
processes (``m3 serve``, the engine) run it so; one-shot CLI commands do not (``ActorSystem(background=False)``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from m3.actors.base import M3Actor
from m3.actors.supervisor import ActorHandle
from m3.protocols.base import Message
from m3.protocols.messages.governance import PruneAudit, RecordAudit, RecordReads
from m3.protocols.messages.memory import Flush

log = logging.getLogger(__name__)

#: Longest time a read-audit record waits before the keeper hands it to the Writer.
AUDIT_DELAY_S = 0.2
#: Reads collected before they go to the Writer without waiting for the delay.
BATCH_READS = 256


class PruneDue(Message):
    """The retention timer fired."""


class HandOver(Message):
    """The collection timer fired."""


def cutoff(retention_days: int, now: datetime | None = None) -> datetime:
    """The time before which read-audit records are pruned."""
    return (now or datetime.now(UTC)) - timedelta(days=retention_days)


class _Logged:
    """The Writer's answer to a prune or a hand-over: logged, never raised (nobody waits for it)."""

    def __init__(self, what: str):
        self._what = what

    def set_result(self, value: int) -> None:
        if value and self._what == "prune":
            log.info("pruned %d read-audit records past retention", value)

    def set_exception(self, exc: BaseException) -> None:
        log.warning("read audit: %s failed (%r)", self._what, exc)


class AuditKeeper(M3Actor):
    def __init__(self, *, writer: ActorHandle, retention_days: int, interval_s: float, periodic: bool, **base: Any):
        super().__init__(**base)
        self._writer = writer
        self._retention_days = retention_days
        self._interval_s = max(1.0, interval_s)
        self._periodic = periodic
        self._reads: list[RecordReads] = []
        self._timers: dict[type[Message], threading.Timer] = {}

    def setup(self) -> None:
        if self._periodic:
            self._prune(PruneDue())  # told before any message is handled: a Flush asked after start follows it

    def release(self) -> None:
        self._hand_over(HandOver())
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {RecordReads: self._collect, HandOver: self._hand_over, PruneDue: self._prune,
                Flush: self._flush}

    def _flush(self, _msg: Flush) -> bool:
        """Everything collected so far goes to the Writer (a Flush asked of it next sees it committed)."""
        self._hand_over(HandOver())
        return True

    def _collect(self, msg: RecordReads) -> None:
        self._reads.append(msg)
        if len(self._reads) >= BATCH_READS:
            self._hand_over(HandOver())
        elif HandOver not in self._timers:
            self._arm(HandOver(), AUDIT_DELAY_S)

    def _hand_over(self, _msg: HandOver) -> None:
        timer = self._timers.pop(HandOver, None)
        if timer is not None:
            timer.cancel()
        reads, self._reads = self._reads, []
        if reads:
            self._writer.tell(RecordAudit(reads=tuple(reads)), _Logged("recording"))

    def _prune(self, _msg: PruneDue) -> None:
        self._timers.pop(PruneDue, None)
        self._writer.tell(PruneAudit(before=cutoff(self._retention_days)), _Logged("prune"))
        self._arm(PruneDue(), self._interval_s)

    def _arm(self, message: Message, delay: float) -> None:
        timer = self._timers[type(message)] = threading.Timer(delay, self.tell_self, args=(message,))
        timer.daemon = True
        timer.start()
