"""The Observer's writes (:class:`~m3.protocols.messages.observations.RecordObservations`), inside the Writer's
transaction: observations not yet held by their owner, their ``derived_from`` links, and the pass's watermark.

"Never twice" is decided here, against committed rows and the request itself, not by the pass: two ticks that
read the same turns (a crash between a tick's read and its commit, or two engines) write each observation once.
An observation's ``source`` is the key of its normalised text (``observe:<digest>``); its owner is (scope,
agent, user).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from m3.protocols.messages.memory import WriteMemories
from m3.protocols.messages.observations import NewObservation, ObservationsRecorded, RecordObservations
from m3.store import loop_state
from m3.store import memories as rows
from m3.store.memory_writes import MemoryWrites
from m3.store.schema import memories as m

#: The memory type of what the Observer writes.
OBSERVATION = "observation"

Owner = tuple[str | None, str | None, str | None, str | None]  # (source key, scope, agent, user)


def record(conn: Connection, msg: RecordObservations,
           clock: Callable[[], datetime]) -> tuple[ObservationsRecorded, list[tuple[str, str]]]:
    """Apply ``msg``; its result and the (id, text) of the new memories to embed."""
    todo = _not_held(conn, msg.observations)
    fresh: list[tuple[str, str]] = []
    created: list[str] = []
    if todo:
        [(outcomes, fresh)] = MemoryWrites(conn, clock).write_all(
            [WriteMemories(memories=tuple(o.memory for o in todo), actor=msg.actor)])
        created = [out.id for out in outcomes if out.created]
        _link(conn, [(out.id, o.derived_from) for out, o in zip(outcomes, todo, strict=True) if out.created],
              clock(), msg.actor)
    now = clock()
    loop_state.set_watermark(conn, msg.pass_name, _merged(loop_state.watermark(conn, msg.pass_name, {}),
                                                          msg.watermark), now)
    return ObservationsRecorded(created=tuple(created), skipped=len(msg.observations) - len(created)), fresh


def _owner_key(memory: Any) -> Owner:
    return (memory.source, memory.scope, memory.agent_id, memory.user_id)


def _not_held(conn: Connection, observations: tuple[NewObservation, ...]) -> list[NewObservation]:
    """The observations whose owner holds no current observation of the same key, first of each kept."""
    keys = sorted({o.memory.source for o in observations if o.memory.source})
    held: set[Owner] = set()
    for start in range(0, len(keys), rows.CHUNK):
        found = conn.execute(select(m.c.source, m.c.scope, m.c.agent_id, m.c.user_id).where(
            m.c.type == OBSERVATION, m.c.retired_at.is_(None), m.c.source.in_(keys[start:start + rows.CHUNK])))
        held.update((r.source, r.scope, r.agent_id, r.user_id) for r in found)
    todo: list[NewObservation] = []
    for o in observations:
        key = _owner_key(o.memory)
        if key not in held:
            held.add(key)
            todo.append(o)
    return todo


def _link(conn: Connection, pairs: list[tuple[str, str | None]], now: datetime, actor: str | None) -> None:
    """``derived_from`` edges from each new observation to its source memory, when that memory still exists
    (it may have been erased since the pass read it)."""
    wanted = [(new, src) for new, src in pairs if src]
    if not wanted:
        return
    alive = {r.id for r in conn.execute(select(m.c.id).where(m.c.id.in_(sorted({src for _, src in wanted}))))}
    events = []
    for new, src in wanted:
        if src in alive and rows.link(conn, new, src, "derived_from", at=now, actor=actor):
            events.append(rows.event(new, "linked", actor, now, to=src, type="derived_from"))
    rows.record_events(conn, events)


def _merged(old: Any, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` over ``old``, where a number never goes back (a late request of an earlier tick moves nothing)."""
    merged = dict(old) if isinstance(old, dict) else {}
    for key, value in new.items():
        before = merged.get(key)
        if isinstance(value, int | float) and isinstance(before, int | float):
            merged[key] = max(before, value)
        else:
            merged[key] = value
    return merged
