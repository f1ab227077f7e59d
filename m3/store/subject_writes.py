"""gdpr_forget inside the Writer's transaction: erase one subject's rows everywhere (what: ``subjects``).

Rows of the subject are deleted (their history, vectors, links, shares, conflicts and handoff links go with
their memory by foreign key); where the subject only *touched* someone else's row (an event it caused, a link
it made, a task it owned), its name is removed and the row kept. The dialect then purges its full-text index of
the deleted text (:meth:`m3.store.dialect.Dialect.purge_fulltext`) inside the same transaction; after the commit
the Writer has the freed pages scrubbed (:meth:`~m3.store.dialect.Dialect.scrub`). What stays is one
``erasures`` row: the subject's SHA-256, when, by whom, and the counts.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, func, insert, select, update

from m3.protocols.messages.governance import Subject
from m3.store.dialect import Dialect
from m3.store.entity_writes import drop_unmentioned, mentioned_by
from m3.store.memories import chunks
from m3.store.schema import agents as ag
from m3.store.schema import conversation_events as ev
from m3.store.schema import entity_stale
from m3.store.schema import erasures as er
from m3.store.schema import memory_history as h
from m3.store.schema import memory_relationships as r
from m3.store.schema import task_events as te
from m3.store.schema import tasks as t
from m3.store.subjects import TABLES, memory_ids, subject_hash, task_ids, where

#: Sections whose matching rows are deleted outright (the others are scrubbed of the subject's name or go by
#: foreign key with the memories).
_DELETED = ("grants", "inbox", "chat", "tokens", "audit")


def forget(conn: Connection, subject: Subject, *, now: datetime, actor: str | None,
           dialect: Dialect) -> tuple[str, dict[str, int], list[str]]:
    """Erase ``subject``; its hash, the rows per section, and the ids of the memories erased."""
    dialect.begin_erasure(conn)
    sections = where(subject)
    counts = {name: conn.execute(select(func.count()).select_from(TABLES[name]).where(clause)).scalar_one()
              for name, clause in sections.items()}
    erased = list(conn.execute(memory_ids(subject)).scalars())
    named = mentioned_by(conn, memory_ids(subject))  # their mentions go with the memories, by foreign key
    # First: which notifications quote the agent's tasks and handoffs is known by their ids.
    conn.execute(delete(TABLES["notifications"]).where(sections["notifications"]))
    if subject.kind == "agent":
        _forget_agent_traces(conn, subject.id)
    for name in _DELETED:
        table = TABLES[name]
        conn.execute(delete(table).where(sections[name]))
    conn.execute(delete(TABLES["memories"]).where(sections["memories"]))
    for part in chunks(erased):  # the entity pass's notes of them (no foreign key: a note outlives a delete)
        conn.execute(delete(entity_stale).where(entity_stale.c.memory_id.in_(part)))
    counts["entities"] = drop_unmentioned(conn, named)  # those only the subject's memories named
    if subject.kind == "agent":
        counts["agent"] = conn.execute(delete(ag).where(ag.c.id == subject.id)).rowcount
    dialect.purge_fulltext(conn)
    digest = subject_hash(subject)
    conn.execute(insert(er).values(subject_hash=digest, kind=subject.kind, at=now, actor=actor, counts=counts))
    return digest, counts, erased


def _forget_agent_traces(conn: Connection, agent: str) -> None:
    """Tasks the agent created go (their subtasks stay, as roots); elsewhere its name is removed."""
    created = task_ids(Subject(kind="agent", id=agent))
    conn.execute(update(t).where(t.c.parent_id.in_(created)).values(parent_id=None))
    conn.execute(delete(te).where(te.c.actor == agent))
    conn.execute(delete(t).where(t.c.creator == agent))
    conn.execute(update(t).where(t.c.owner == agent).values(owner=None, result_note=None, lease_expires_at=None))
    conn.execute(update(h).where(h.c.actor == agent).values(actor=None))
    conn.execute(update(r).where(r.c.created_by == agent).values(created_by=None))
    conn.execute(update(ev).where(ev.c.actor == agent).values(actor=None))  # chat vectors go with the chat rows
