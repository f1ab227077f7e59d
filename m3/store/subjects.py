"""What the store holds about one data subject (an agent or a user), table by table: gdpr_export reads it,
gdpr_forget (``subject_writes``) erases the same rows.

An agent subject is what the agent wrote or was sent: its memories (every version), their history, links,
shares, vectors and entity mentions and relations, its chat rows, its registration and tokens, the tasks it
created or owns, handoffs and notifications to or from it, and the read-audit records about its data or its
reads. A user subject is the memories about that user (``user_id``) with the same dependants, and the read-audit
records about them; chat rows carry no user, so a user subject has none.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, false, or_, select

from m3.protocols.messages.governance import Subject
from m3.store.schema import agent_tokens as tk
from m3.store.schema import agents as ag
from m3.store.schema import chatlog as cl
from m3.store.schema import conflicts as cf
from m3.store.schema import entity_mentions as mn
from m3.store.schema import entity_relations as rel
from m3.store.schema import erasures as er
from m3.store.schema import inbox as ib
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e
from m3.store.schema import memory_grants as g
from m3.store.schema import memory_history as h
from m3.store.schema import memory_relationships as r
from m3.store.schema import notifications as nt
from m3.store.schema import read_audit as ra
from m3.store.schema import task_events as te
from m3.store.schema import tasks as t


def subject_hash(subject: Subject) -> str:
    """SHA-256 of ``<kind>:<id>``: what the erasure record keeps of the subject."""
    return hashlib.sha256(f"{subject.kind}:{subject.id}".encode()).hexdigest()


def _is_agent(subject: Subject, column: Any) -> ColumnElement[bool]:
    """``column == subject`` for an agent subject; never true for a user subject."""
    return column == subject.id if subject.kind == "agent" else false()


def memory_ids(subject: Subject) -> Select[Any]:
    """The ids of every memory row (all versions) of the subject."""
    owner = m.c.agent_id if subject.kind == "agent" else m.c.user_id
    return select(m.c.id).where(owner == subject.id)


def task_ids(subject: Subject) -> Select[Any]:
    """Tasks the agent created (erased with it); tasks it only owns are kept, without it."""
    return select(t.c.id).where(_is_agent(subject, t.c.creator))


def handoff_ids(subject: Subject) -> Select[Any]:
    """Handoffs to or from the agent."""
    return select(ib.c.id).where(or_(_is_agent(subject, ib.c.agent_id), _is_agent(subject, ib.c.from_agent)))


def where(subject: Subject) -> dict[str, ColumnElement[bool]]:
    """Per table, the rows of the subject (the order is the order of export)."""
    ids = memory_ids(subject)
    return {
        "memories": m.c.id.in_(ids),
        "history": or_(h.c.memory_id.in_(ids), _is_agent(subject, h.c.actor)),
        "relationships": or_(r.c.from_id.in_(ids), r.c.to_id.in_(ids), _is_agent(subject, r.c.created_by)),
        "grants": or_(g.c.memory_id.in_(ids), _is_agent(subject, g.c.agent_id)),
        "vectors": e.c.memory_id.in_(ids),
        "conflicts": or_(cf.c.memory_a.in_(ids), cf.c.memory_b.in_(ids)),
        # What the entity indexer found in those memories (names as written, relations); docs/entities.md.
        "entity_mentions": mn.c.memory_id.in_(ids),
        "entity_relations": rel.c.memory_id.in_(ids),
        "chat": _is_agent(subject, cl.c.agent_id),
        "tokens": _is_agent(subject, tk.c.agent_id),
        "tasks": or_(_is_agent(subject, t.c.creator), _is_agent(subject, t.c.owner)),
        "task_events": or_(te.c.task_id.in_(task_ids(subject)), _is_agent(subject, te.c.actor)),
        "inbox": ib.c.id.in_(handoff_ids(subject)),
        # Also what others were told about the agent's tasks and handoffs: those messages quote them.
        "notifications": or_(_is_agent(subject, nt.c.agent_id), _is_agent(subject, nt.c.from_agent),
                             nt.c.ref_id.in_(task_ids(subject)), nt.c.ref_id.in_(handoff_ids(subject))),
        "audit": (or_(ra.c.subject_agent == subject.id, ra.c.reader == subject.id) if subject.kind == "agent"
                  else ra.c.subject_user == subject.id),
    }


#: The table behind each section of :func:`where`.
TABLES = {"memories": m, "history": h, "relationships": r, "grants": g, "vectors": e, "conflicts": cf,
          "entity_mentions": mn, "entity_relations": rel, "chat": cl, "tokens": tk, "tasks": t, "task_events": te,
          "inbox": ib, "notifications": nt, "audit": ra}
#: Every table an erasure may have deleted from or changed, rewritten after it (``Dialect.scrub``).
SCRUBBED_TABLES = ("memories", "memory_history", "memory_relationships", "memory_grants", "memory_embeddings",
                   "conflicts", "chatlog", "agents", "agent_tokens", "tasks", "task_events", "inbox", "inbox_links",
                   "notifications", "read_audit", "erasures",
                   # the entity graph: names and spellings taken from the subject's memories (docs/entities.md)
                   "entities", "entity_mentions", "entity_relations", "entity_merges", "entity_stale",
                   "chat_embeddings", "conversation_events")
#: Columns an export leaves out: internal order, generated full-text columns, the floats and the token hashes.
_HIDDEN = {"seq", "fts_content", "fts_title", "vector", "token_hash"}


def export(conn: Connection, subject: Subject) -> dict[str, Any]:
    """Every section of :func:`where` as lists of rows (dicts), plus the agent's registration and erasures."""
    out: dict[str, Any] = {}
    for name, clause in where(subject).items():
        table = TABLES[name]
        columns = [c for c in table.c if c.name not in _HIDDEN]
        out[name] = [dict(row) for row in conn.execute(select(*columns).where(clause).order_by(table.c.seq))
                     .mappings()]
    agent = conn.execute(select(*[c for c in ag.c if c.name != "seq"]).where(_is_agent(subject, ag.c.id))
                         ).mappings().first()
    out["agent"] = dict(agent) if agent is not None else None
    out["erasures"] = [dict(row) for row in conn.execute(
        select(er.c.at, er.c.kind, er.c.actor, er.c.counts).where(er.c.subject_hash == subject_hash(subject))
        .order_by(er.c.seq)).mappings()]
    return out
