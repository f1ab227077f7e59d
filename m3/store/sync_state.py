"""A store's place in a warehouse sync: its node id, its hybrid logical clock, its pull watermark (``sync_state``).

The hybrid logical clock (HLC) orders changes without trusting wall clocks: a value is ``physical_ms << 16 |
counter``; each local change gets a value above every value this node has given or received, and at least its
own wall-clock time. So a change made after seeing another always orders after it, and changes made without
seeing each other order by time, ties broken by the node id (docs/sync.md, "How conflicts resolve").
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, select

from m3.store import schema

_T = schema.sync_state
#: Bits of an HLC value below the milliseconds (the counter).
COUNTER_BITS = 16


def get(conn: Connection, name: str, default: Any = None) -> Any:
    value = conn.execute(select(_T.c.value).where(_T.c.name == name)).scalar_one_or_none()
    return default if value is None else value


def put(conn: Connection, name: str, value: Any) -> None:
    now = datetime.now(UTC)
    if not conn.execute(_T.update().where(_T.c.name == name).values(value=value, updated_at=now)).rowcount:
        conn.execute(_T.insert().values(name=name, value=value, updated_at=now))


def node_id(conn: Connection) -> str:
    """This store's node id, made on first use (a store copied from another's file keeps it: see docs/sync.md)."""
    found = get(conn, "node")
    if found is None:
        found = uuid.uuid4().hex
        put(conn, "node", found)
    return str(found)


def hlc_of_ms(ms: int) -> int:
    return ms << COUNTER_BITS


def ms_of_hlc(hlc: int) -> int:
    return hlc >> COUNTER_BITS


class HybridClock:
    """The node's HLC, loaded from and saved to ``sync_state`` by the transaction that uses it."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self.last = int(get(conn, "clock", 0))

    def stamp(self, at_ms: int) -> int:
        """A value for a change made at ``at_ms`` (wall clock): above every value given or seen."""
        self.last = max(self.last + 1, hlc_of_ms(at_ms))
        return self.last

    def observe(self, hlc: int) -> None:
        self.last = max(self.last, hlc)

    def save(self) -> None:
        put(self._conn, "clock", self.last)
