"""Checks of a coordination stress run against the store itself (read directly, not through m3).

* every acknowledged memory write, handoff (to the right receiver), claim
  and completion is stored;
* replaying each task's history in commit order, no claim happened while
  another agent's lease was still valid, no lease was renewed by an agent
  that did not hold it, and no task was completed outside a valid lease;
* no operation failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, create_engine, select

from benchmarks.coordination_agents import TASK_KIND, Record
from m3.store.schema import inbox, memories, task_events, tasks

ENDS_A_LEASE = {"pending", "blocked", "completed", "failed", "cancelled"}


def when(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    text = str(value)
    return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)


def _present(conn: Connection, column: Any, ids: Sequence[str], *extra: Any) -> dict[str, Any]:
    """id -> row for those of ``ids`` present in ``column``'s table."""
    out: dict[str, Any] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start:start + 500])
        for row in conn.execute(select(column, *extra).where(column.in_(chunk))):
            out[row[0]] = row
    return out


def replay(events: Iterable[Any]) -> tuple[list[str], set[tuple[str, str, datetime]]]:
    """Lease violations in task histories (ordered by seq), and every claim as (task, agent, lease end)."""
    violations: list[str] = []
    claims: set[tuple[str, str, datetime]] = set()
    holder: dict[str, tuple[str, datetime] | None] = {}
    for ev in events:
        task, name, actor, at, details = ev.task_id, ev.event, ev.actor, ev.at, ev.details
        held = holder.get(task)
        if name == "claimed":
            if held is not None and at < held[1]:
                violations.append(f"{task}: claimed by {actor} at {at} while {held[0]}'s lease ran to {held[1]}")
            end = when(details["lease_expires_at"])
            holder[task] = (actor, end)
            claims.add((task, actor, end))
        elif name == "lease_renewed":
            if held is None or held[0] != actor or at >= held[1]:
                violations.append(f"{task}: {actor} renewed at {at} a lease it did not hold ({held})")
            holder[task] = (actor, when(details["lease_expires_at"]))
        elif name in {"lease_expired", "assigned", "deleted"}:
            holder[task] = None
        elif name == "updated" and details.get("to") in ENDS_A_LEASE:
            if details["to"] == "completed" and (held is None or held[0] != actor or at >= held[1]):
                violations.append(f"{task}: completed by {actor} at {at} outside a valid lease ({held})")
            holder[task] = None
    return violations, claims


def verify(url: str, records: list[Record]) -> dict[str, Any]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return _verify(conn, records)
    finally:
        engine.dispose()


def _verify(conn: Connection, records: list[Record]) -> dict[str, Any]:
    acked_memories = [m for r in records for m in r.memories]
    stored = _present(conn, memories.c.id, acked_memories)
    handoffs = [h for r in records for h in r.handoffs]
    inboxes = _present(conn, inbox.c.id, [h[0] for h in handoffs], inbox.c.agent_id)
    misrouted = [h for h in handoffs if h[0] not in inboxes or inboxes[h[0]][1] != h[1]]
    stress = select(tasks.c.id).where(tasks.c.kind == TASK_KIND).scalar_subquery()
    events = conn.execute(select(task_events).where(task_events.c.task_id.in_(stress)).order_by(task_events.c.seq))
    violations, claimed = replay(events)
    acked_claims = [(c["task"], r.agent, when(c["lease_expires_at"])) for r in records for c in r.claims]
    unrecorded = [c for c in acked_claims if c not in claimed]
    completed = [(t, r.agent) for r in records for t in r.completed]
    final = _present(conn, tasks.c.id, [t for t, _ in completed], tasks.c.state, tasks.c.owner)
    not_completed = [(t, a) for t, a in completed if t not in final or tuple(final[t][1:]) != ("completed", a)]
    errors = [e for r in records for e in r.errors]
    checks = {
        "memories_acknowledged": len(acked_memories), "memories_missing": len(acked_memories) - len(stored),
        "handoffs_acknowledged": len(handoffs), "handoffs_missing_or_misrouted": len(misrouted),
        "claims_acknowledged": len(acked_claims), "claims_in_history": len(claimed),
        "claims_not_in_history": len(unrecorded), "claims_abandoned": sum(c["abandoned"] for r in records
                                                                           for c in r.claims),
        "distinct_tasks_claimed": len({t for t, _, _ in claimed}),
        "reclaimed_after_expiry": len(claimed) - len({t for t, _, _ in claimed}),
        "completions_acknowledged": len(completed), "completions_not_stored": len(not_completed),
        "lease_violations": len(violations), "errors": len(errors),
        "empty_claims": sum(r.empty_claims for r in records),
    }
    checks["ok"] = not (checks["memories_missing"] or misrouted or unrecorded or not_completed or violations
                        or errors)
    checks["examples"] = (violations + [str(c) for c in unrecorded] + errors)[:10]
    return checks
