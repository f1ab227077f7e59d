"""The decay pass of the cognitive loop: archive what nobody uses and what has expired, never delete.

Decayed importance is computed at the tick, never stored, so that restoring an archived memory gives back
exactly what search showed before::

    decayed = importance × 0.5 ^ (days since last use / loop.decay.half_life_days)

where the last use is ``last_accessed_at`` or else ``recorded_at``, at ``ctx.now``. A memory is archived
(reason ``decayed``) when ``decayed < loop.decay.archive_below`` and it has been idle at least
``loop.decay.min_idle_days``; pinned memories, ``loop.decay.exempt_types`` and file chunks (which
re-indexing owns) never decay. A memory whose ``expires_at`` has passed is archived with reason ``expired``,
whatever its type or pin: search already hides it from that moment (:func:`m3.store.filters.archive_clause`).

Each tick reads at most ``ctx.budget`` current, unarchived memories after the cursor ``after_seq`` of its
watermark, in ``seq`` order; when a tick reaches the end of the store the cursor wraps to 0, so a large store
is swept over several ticks. The one Writer request (:class:`~m3.protocols.messages.archive.ArchiveMemories`)
archives and moves the cursor in one transaction, and re-checks each memory there (used, pinned or retired
since the read: left alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Connection, RowMapping, select

from m3.cognition.passes import PassContext, PassStep
from m3.config import SETTINGS
from m3.errors import ConfigError
from m3.protocols.messages.archive import ArchiveItem, ArchiveMemories, ArchiveResult
from m3.protocols.messages.memory import FILE_CHUNK
from m3.store import loop_state
from m3.store.schema import memories as m

NAME = "decay"
_PREFIX = f"loop.{NAME}."
#: The defaults of ``loop.decay.*`` (without the prefix), for a context that leaves a setting out.
DEFAULTS: dict[str, Any] = {s.key.removeprefix(_PREFIX): s.default for s in SETTINGS if s.key.startswith(_PREFIX)}
SECONDS_PER_DAY = 86_400.0

_COLUMNS = (m.c.seq, m.c.id, m.c.type, m.c.importance, m.c.pinned, m.c.expires_at, m.c.last_accessed_at,
            m.c.recorded_at)


def decayed_importance(importance: float, last_used: datetime, now: datetime, half_life_days: float) -> float:
    """``importance`` halved for every ``half_life_days`` between ``last_used`` and ``now`` (none before it)."""
    idle_days = max(0.0, (now - last_used).total_seconds() / SECONDS_PER_DAY)
    return float(importance * 0.5 ** (idle_days / half_life_days))


@dataclass(frozen=True)
class DecayRules:
    """The pass's settings, checked."""

    half_life_days: float
    archive_below: float
    min_idle_days: float
    exempt_types: frozenset[str]

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> DecayRules:
        """Rules from ``ctx.settings`` (defaults for what it leaves out); ``ConfigError`` for nonsense."""
        values = {**DEFAULTS, **settings}
        try:
            rules = cls(half_life_days=float(values["half_life_days"]), archive_below=float(values["archive_below"]),
                        min_idle_days=float(values["min_idle_days"]),
                        exempt_types=frozenset(values["exempt_types"]) | {FILE_CHUNK})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"loop.decay settings are not numbers: {exc}") from exc
        if not rules.half_life_days > 0:
            raise ConfigError(f"loop.decay.half_life_days must be above 0, not {rules.half_life_days}",
                              hint="Set a number of days, e.g. 90.")
        if not 0 <= rules.archive_below <= 1:
            raise ConfigError(f"loop.decay.archive_below must lie in 0..1, not {rules.archive_below}",
                              hint="Importance is 0..1; 0 turns archiving by decay off.")
        if not rules.min_idle_days >= 0:
            raise ConfigError(f"loop.decay.min_idle_days must be 0 or more, not {rules.min_idle_days}")
        return rules

    def decide(self, row: RowMapping, now: datetime) -> ArchiveItem | None:
        """Whether to archive ``row`` at ``now``, and why (None: keep it)."""
        last_used = row["last_accessed_at"] or row["recorded_at"]
        if row["expires_at"] is not None and row["expires_at"] <= now:
            return ArchiveItem(id=row["id"], reason="expired", last_used=last_used)
        if row["pinned"] or row["type"] in self.exempt_types:
            return None
        if (now - last_used).total_seconds() < self.min_idle_days * SECONDS_PER_DAY:
            return None
        decayed = decayed_importance(row["importance"], last_used, now, self.half_life_days)
        if decayed >= self.archive_below:
            return None
        return ArchiveItem(id=row["id"], reason="decayed", last_used=last_used, decayed=decayed)


class DecayPass:
    """:class:`~m3.cognition.passes.LoopPass` ``decay`` (see the module docstring)."""

    name: ClassVar[str] = NAME

    def step(self, conn: Connection, ctx: PassContext) -> PassStep:
        rules = DecayRules.of(ctx.settings)
        if ctx.budget <= 0:
            return PassStep(seen=0)
        after = cursor(loop_state.watermark(conn, self.name, {}))
        found = list(conn.execute(
            select(*_COLUMNS).where(m.c.seq > after, m.c.retired_at.is_(None), m.c.archived_at.is_(None))
            .order_by(m.c.seq).limit(ctx.budget)).mappings())
        items = tuple(item for row in found if (item := rules.decide(row, ctx.now)) is not None)
        more = len(found) == ctx.budget
        # The end of the store reached: the next tick starts over.
        watermark = {"after_seq": int(found[-1]["seq"]) if more else 0}
        request = ArchiveMemories(items=items, pass_name=self.name, watermark=watermark, at=ctx.now)
        return PassStep(seen=len(found), writes=(request,), more=more)

    def produced(self, replies: Sequence[Any]) -> int:
        """Memories archived."""
        return sum(len(reply.archived) for reply in replies if isinstance(reply, ArchiveResult))


def cursor(watermark: Any) -> int:
    """The ``seq`` the next tick reads after (0 for a missing or unreadable watermark: a fresh sweep)."""
    if isinstance(watermark, Mapping):
        value = watermark.get("after_seq", 0)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0
