"""The AuditKeeper: the periodic trigger of read-audit retention.

Pruning itself is a plain store function (:func:`m3.store.audit_writes.prune`) the Writer runs for a
:class:`~m3.protocols.messages.governance.PruneAudit`; this actor only asks for it: once when it starts and then
every ``audit.prune_interval_s``, with the cut-off ``audit.retention_days`` before now. A long-running process
(``m3 serve``, the engine) runs it; one-shot CLI commands do not (``ActorSystem(background=False)``).
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
from m3.protocols.messages.governance import PruneAudit

log = logging.getLogger(__name__)


class PruneDue(Message):
    """The keeper's timer fired."""


def cutoff(retention_days: int, now: datetime | None = None) -> datetime:
    """The time before which read-audit records are pruned."""
    return (now or datetime.now(UTC)) - timedelta(days=retention_days)


class _Pruned:
    """The Writer's answer to a prune: logged."""

    def set_result(self, value: int) -> None:
        if value:
            log.info("pruned %d read-audit records past retention", value)

    def set_exception(self, exc: BaseException) -> None:
        log.warning("read-audit pruning failed (%r); trying again at the next interval", exc)


class AuditKeeper(M3Actor):
    def __init__(self, *, writer: ActorHandle, retention_days: int, interval_s: float, periodic: bool, **base: Any):
        super().__init__(**base)
        self._writer = writer
        self._retention_days = retention_days
        self._interval_s = max(1.0, interval_s)
        self._periodic = periodic
        self._timer: threading.Timer | None = None

    def setup(self) -> None:
        if self._periodic:
            self._prune(PruneDue())  # told before any message is handled: a Flush asked after start follows it

    def release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {PruneDue: self._prune}

    def _prune(self, _msg: PruneDue) -> None:
        self._writer.tell(PruneAudit(before=cutoff(self._retention_days)), _Pruned())
        self._arm(self._interval_s)

    def _arm(self, delay: float) -> None:
        self._timer = threading.Timer(delay, self.tell_self, args=(PruneDue(),))
        self._timer.daemon = True
        self._timer.start()
