"""Change capture for warehouse sync: SQLite triggers that note every changed row in ``sync_changes``.

Capture is switched on once, by the first sync (:func:`enable`), in one transaction that creates the triggers
and notes every row already stored, so a store that synced late sends everything it held. A trigger only notes
the table, the row's local ``seq`` and the wall-clock time; the Sync actor turns notes into stamped versions
(:mod:`m3.store.sync_writes`). Columns that stay on the machine (:mod:`m3.store.sync_tables`) fire nothing when
they alone change, so a search that bumps access counts costs a sync nothing.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from m3.errors import SyncUnsupported
from m3.store import sync_state
from m3.store.dialect import dialect_for
from m3.store.sync_tables import SYNCED, SyncTable

#: SQLite's wall clock in milliseconds since the epoch (julianday keeps the fraction of a second).
_NOW_MS = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"


def enabled(conn: Connection) -> bool:
    return bool(sync_state.get(conn, "capture", False))


def enable(conn: Connection, now_ms: int) -> int:
    """Create the capture triggers and note every row already stored (once); rows noted (0 when it was on).

    Raises:
        SyncUnsupported: the store is not SQLite.
    """
    dialect = dialect_for(conn)
    if not dialect.syncs:
        raise SyncUnsupported("this store does not sync with a warehouse: only a SQLite store does")
    if enabled(conn):
        return 0
    noted = 0
    for one in SYNCED:
        for statement in triggers(one):
            conn.execute(text(statement))
        noted += conn.execute(text(
            f"INSERT INTO sync_changes (tbl, row_seq, at_ms) SELECT '{one.name}', seq, {int(now_ms)} "
            f"FROM {one.name} ORDER BY seq")).rowcount
    sync_state.put(conn, "capture", True)
    return noted


def start_over(conn: Connection, warehouse: str, now_ms: int) -> int:
    """This store meets warehouse ``warehouse`` for the first time (a new or emptied warehouse after another):
    forget what it agreed with the old one and note every row again, so the next push sends everything and the
    pull starts from the beginning; rows noted. The first warehouse a store meets just has its id recorded."""
    known = sync_state.get(conn, "warehouse")
    sync_state.put(conn, "warehouse", warehouse)
    if known is None or known == warehouse:
        return 0
    for name in ("sync_rows", "sync_outbox", "sync_changes"):
        conn.execute(text(f"DELETE FROM {name}"))
    sync_state.put(conn, "pulled", 0)
    noted = 0
    for one in SYNCED:
        noted += conn.execute(text(
            f"INSERT INTO sync_changes (tbl, row_seq, at_ms) SELECT '{one.name}', seq, {int(now_ms)} "
            f"FROM {one.name} ORDER BY seq")).rowcount
    return noted


def triggers(one: SyncTable) -> list[str]:
    """The three triggers of one table (their names start with ``m3sync_``)."""
    note = "INSERT INTO sync_changes (tbl, row_seq, at_ms) VALUES ('{t}', {row}.seq, " + _NOW_MS + ");"
    t = one.name
    watched = ", ".join(one.data_columns)
    return [
        f"CREATE TRIGGER IF NOT EXISTS m3sync_{t}_ins AFTER INSERT ON {t} BEGIN {note.format(t=t, row='NEW')} END",
        f"CREATE TRIGGER IF NOT EXISTS m3sync_{t}_upd AFTER UPDATE OF {watched} ON {t} "
        f"BEGIN {note.format(t=t, row='NEW')} END",
        f"CREATE TRIGGER IF NOT EXISTS m3sync_{t}_del AFTER DELETE ON {t} BEGIN {note.format(t=t, row='OLD')} END",
    ]
