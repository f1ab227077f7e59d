"""Reads for the admin tools: the store's integrity (admin_verify) and what waits for a vector (the backlog).

Every check reports what it found and changes nothing; a problem names the rows by id (at most
``SHOWN`` of them), never their content.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

import numpy as np
from sqlalchemy import Column, Connection, Table, and_, func, or_, select

from m3.store import schema, vectors
from m3.store.dialect import Fact, dialect_for
from m3.store.memories import content_hash

#: Most ids a problem lists.
SHOWN = 20

m, e = schema.memories, schema.memory_embeddings

#: (table, column, parent column) of every reference m3 keeps between rows: each must point at a row.
REFERENCES: tuple[tuple[Table, str, Column[Any]], ...] = (
    (schema.memory_relationships, "from_id", m.c.id), (schema.memory_relationships, "to_id", m.c.id),
    (schema.memory_history, "memory_id", m.c.id), (e, "memory_id", m.c.id),
    (schema.memory_grants, "memory_id", m.c.id), (m, "superseded_by", m.c.id),
    (schema.inbox_links, "memory_id", m.c.id), (schema.inbox_links, "inbox_id", schema.inbox.c.id),
    (schema.conflicts, "memory_a", m.c.id), (schema.conflicts, "memory_b", m.c.id),
    (schema.tasks, "parent_id", schema.tasks.c.id), (schema.tasks, "result_memory_id", m.c.id),
    (schema.task_events, "task_id", schema.tasks.c.id), (schema.agent_tokens, "agent_id", schema.agents.c.id),
)


def verify(conn: Connection, *, full: bool) -> list[dict[str, Any]]:
    """Each check's finding: ``{check, status (ok|warn|fail), message, hint, ids}``."""
    facts = [_row(f) for f in dialect_for(conn).integrity(conn, full=full)]
    facts.append(_hashes(conn))
    facts.extend(_dimensions(conn))
    facts.extend(_references(conn))
    facts.append(_archive_state(conn))
    return facts


def verify_fulltext(conn: Connection) -> list[dict[str, Any]]:
    """The full-text checks' findings, shaped as :func:`verify`'s."""
    return [_row(f) for f in dialect_for(conn).fulltext_integrity(conn)]


def _row(fact: Fact, ids: list[str] | None = None) -> dict[str, Any]:
    return {**asdict(fact), "ids": ids or []}


def _hashes(conn: Connection) -> dict[str, Any]:
    """Every memory's content_hash is the SHA-256 of its content (a mismatch: the row was changed outside m3)."""
    checked, bad = 0, []
    for memory_id, content, digest in conn.execute(select(m.c.id, m.c.content, m.c.content_hash).order_by(m.c.seq)):
        checked += 1
        if content_hash(content) != digest:
            bad.append(memory_id)
    if not bad:
        return _row(Fact("memories.content_hash", "ok", f"{checked} memories match their content hash"))
    return _row(Fact("memories.content_hash", "fail", f"{len(bad)} of {checked} memories do not match their "
                     "content hash", "Their content changed outside m3: compare with a backup or the history "
                     "(memory_history) and correct them with memory_update."), bad[:SHOWN])


def _dimensions(conn: Connection) -> list[dict[str, Any]]:
    """Each model's vectors have its dimension: the ``dim`` column, the vector's length, the model's row."""
    models = {str(r.model): int(r.dim) for r in conn.execute(select(schema.embedding_models))}
    by_model: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for memory_id, model, dim, vector in conn.execute(select(e.c.memory_id, e.c.model, e.c.dim, e.c.vector)):
        counts[model] = counts.get(model, 0) + 1
        expected = models.get(model, dim)
        if dim != expected or int(np.asarray(vector).size) != expected:
            by_model.setdefault(model, []).append(memory_id)
    facts = []
    for model in sorted(counts):
        bad = by_model.get(model, [])
        status: Literal["ok", "fail"] = "fail" if bad else "ok"
        message = (f"{len(bad)} of {counts[model]} vectors of {model} do not have its dimension "
                   f"{models.get(model, 'as recorded')}" if bad else f"{counts[model]} vectors of {model} have "
                   "its dimension")
        hint = "Re-embed them: admin_reembed recomputes what is missing once these rows are removed." if bad else None
        facts.append(_row(Fact(f"vectors.{model}", status, message, hint), bad[:SHOWN]))
    return facts


def _references(conn: Connection) -> list[dict[str, Any]]:
    """Rows whose reference points at no row (foreign keys not enforced, or rows changed outside m3)."""
    facts = []
    for table, column, parent in REFERENCES:
        col = table.c[column]
        key = table.c.id if "id" in table.c else table.c.seq
        target = parent.table.alias("parent")  # an alias: memories.superseded_by refers to its own table
        missing = ~select(target.c[parent.name]).where(target.c[parent.name] == col).exists()
        query = select(key).where(col.is_not(None), missing).order_by(table.c.seq)
        dangling = [str(row[0]) for row in conn.execute(query.limit(SHOWN))]
        if dangling:
            total = int(conn.execute(select(func.count()).select_from(table).where(col.is_not(None), missing))
                        .scalar_one())
            facts.append(_row(Fact(f"links.{table.name}.{column}", "fail",
                                   f"{total} rows of {table.name} point with {column} at no {parent.table.name} row",
                                   "Restore the missing rows from an export or a backup, or remove the dangling "
                                   "ones; m3 does not remove them by itself."), dangling))
    if not facts:
        facts.append(_row(Fact("links", "ok", f"all {len(REFERENCES)} kinds of reference point at existing rows")))
    return facts


#: The reasons the decay pass archives for (m3.protocols.messages.archive.ArchiveReason).
ARCHIVE_REASONS = ("decayed", "expired")


def _archive_state(conn: Connection) -> dict[str, Any]:
    """``archived_at`` and ``archive_reason`` are set together, with a known reason (an archived memory that
    breaks this would be hidden for no reason a reader could see, or shown while marked archived)."""
    odd = or_(and_(m.c.archived_at.is_(None), m.c.archive_reason.is_not(None)),
              and_(m.c.archived_at.is_not(None), or_(m.c.archive_reason.is_(None),
                                                      m.c.archive_reason.not_in(ARCHIVE_REASONS))))
    archived = int(conn.execute(select(func.count()).where(m.c.archived_at.is_not(None))).scalar_one())
    bad = [str(row[0]) for row in conn.execute(select(m.c.id).where(odd).order_by(m.c.seq).limit(SHOWN))]
    if not bad:
        return _row(Fact("memories.archive_state", "ok", f"{archived} archived memories, each with its reason"))
    total = int(conn.execute(select(func.count()).where(odd)).scalar_one())
    return _row(Fact("memories.archive_state", "fail", f"{total} memories have archived_at and archive_reason "
                     "out of step", "They were changed outside m3: memory_restore clears both columns."), bad)


def backlog(conn: Connection, models: list[str], limit: int) -> list[dict[str, Any]]:
    """Per model: how many current memories wait for a vector of it, since when, and the oldest ``limit`` ids."""
    em = schema.embedding_models
    states = {str(r[0]): str(r[1]) for r in conn.execute(select(em.c.model, em.c.state).order_by(em.c.model))}
    out = []
    for model in dict.fromkeys([*models, *states]):
        waiting = (m.c.retired_at.is_(None),
                   ~select(e.c.memory_id).where(e.c.model == model, e.c.memory_id == m.c.id).exists())
        count = vectors.count_missing(conn, model)
        # Walked from the oldest memory on: only when something waits (otherwise it would read every row).
        oldest = conn.execute(select(m.c.id, m.c.recorded_at).where(*waiting).order_by(m.c.seq)
                              .limit(limit)).all() if count else []
        out.append({"model": model, "state": states.get(model), "pending": count,
                    "oldest_recorded_at": oldest[0][1] if oldest else None,
                    "oldest": [{"id": row[0], "recorded_at": row[1]} for row in oldest]})
    return out
