"""The cognitive loop's per-pass state (``loop_state``): watermark, pause flag, last run.

A pass reads its watermark at the start of a tick (any connection) and moves it with :func:`set_watermark` in
the Writer's transaction that commits what the pass wrote, so work is never skipped nor done twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from m3.store.schema import loop_state as ls


def state(conn: Connection, name: str) -> dict[str, Any] | None:
    """The row of pass ``name`` (``watermark``, ``paused``, ``updated_at``), or None before its first run."""
    row = conn.execute(select(ls.c.watermark, ls.c.paused, ls.c.updated_at).where(ls.c.name == name)).mappings().first()
    return dict(row) if row is not None else None


def watermark(conn: Connection, name: str, default: Any = None) -> Any:
    """What pass ``name`` has looked at so far (the JSON it stored), ``default`` before its first run."""
    found = state(conn, name)
    return default if found is None else found["watermark"]


def _upsert(conn: Connection, name: str, now: datetime, **values: Any) -> None:
    done = conn.execute(update(ls).where(ls.c.name == name).values(updated_at=now, **values))
    if not done.rowcount:
        conn.execute(insert(ls).values(name=name, watermark=values.get("watermark", {}),
                                       paused=values.get("paused", False), updated_at=now))


def set_watermark(conn: Connection, name: str, value: Any, now: datetime) -> None:
    """Move pass ``name``'s watermark (inside the transaction that commits its writes)."""
    _upsert(conn, name, now, watermark=value)


def set_paused(conn: Connection, name: str, paused: bool, now: datetime) -> None:
    """Pause or resume pass ``name`` (kept across restarts)."""
    _upsert(conn, name, now, paused=paused)
