"""Reads of the read audit (changes: ``audit_writes``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, or_, select

from m3.protocols.messages.governance import QueryAudit
from m3.store.schema import read_audit as ra


def query(conn: Connection, msg: QueryAudit) -> tuple[list[dict[str, Any]], int | None]:
    """Records matching ``msg``, oldest first, after seq ``msg.after``; and the ``after`` of the next page."""
    conds: list[Any] = [ra.c.seq > msg.after]
    for column, value in (("subject_agent", msg.subject_agent), ("subject_user", msg.subject_user),
                          ("reader", msg.reader)):
        if value is not None:
            conds.append(ra.c[column] == value)
    if msg.since is not None:
        conds.append(ra.c.at >= msg.since)
    if msg.until is not None:
        conds.append(ra.c.at < msg.until)
    if msg.confined_to is not None:
        conds.append(or_(ra.c.subject_agent == msg.confined_to, ra.c.reader == msg.confined_to))
    found = [dict(row) for row in conn.execute(
        select(ra).where(and_(*conds)).order_by(ra.c.seq).limit(msg.limit + 1)).mappings()]
    more = len(found) > msg.limit
    found = found[:msg.limit]
    return found, (found[-1]["seq"] if more else None)
