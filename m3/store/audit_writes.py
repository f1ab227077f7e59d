"""Changes to the read audit inside the Writer's transaction: record reads, prune old records (reads: ``audit``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, delete, insert, select

from m3.protocols.messages.governance import RecordReads
from m3.store.memories import chunks
from m3.store.schema import chatlog as cl
from m3.store.schema import memories as m
from m3.store.schema import read_audit as ra

_INSERT = insert(ra)  # built once: the statement memoises its cache key


def record(conn: Connection, batch: Sequence[RecordReads]) -> int:
    """Add one record per row each read showed, with the row's owner as its subject; how many were added.

    Owners are looked up once for the whole batch (one query per kind); a row erased since it was read
    has nothing left to audit and is skipped.
    """
    owners = _owners(conn, {(kind, ref) for msg in batch for kind, ref in msg.refs})
    values = [{"at": msg.at, "reader": msg.reader, "tool": msg.tool, "kind": kind, "ref_id": ref,
               "subject_agent": owners[(kind, ref)][0], "subject_user": owners[(kind, ref)][1]}
              for msg in batch for kind, ref in dict.fromkeys(msg.refs) if (kind, ref) in owners]
    if values:
        conn.execute(_INSERT, values)
    return len(values)


def _owners(conn: Connection, refs: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    found: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    memory_ids = sorted(ref for kind, ref in refs if kind == "memory")
    for part in chunks(memory_ids):
        for memory_id, agent, user in conn.execute(select(m.c.id, m.c.agent_id, m.c.user_id).where(m.c.id.in_(part))):
            found[("memory", memory_id)] = (agent, user)
    chat_ids = sorted(ref for kind, ref in refs if kind == "chat")
    for part in chunks(chat_ids):
        for chat_id, agent in conn.execute(select(cl.c.id, cl.c.agent_id).where(cl.c.id.in_(part))):
            found[("chat", chat_id)] = (agent, None)
    return found


def prune(conn: Connection, before: datetime) -> int:
    """Delete the records of reads before ``before`` (``audit.retention_days`` ago); how many went."""
    return conn.execute(delete(ra).where(ra.c.at < before)).rowcount
