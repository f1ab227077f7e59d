"""Reads of the entity graph, every one through the memories its reader may read (docs/entities.md).

An entity is visible when at least one current memory the reader's isolation admits mentions it; a mention or
a relation is visible when its memory is. So no entity read names a memory, or shows text, its reader could not
open with memory_get; and an entity only another agent's private memories mention does not exist for the reader.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, and_, bindparam, case, func, or_, select
from sqlalchemy.orm import aliased

from m3.errors import NotFound
from m3.protocols.messages.entities import normalise
from m3.protocols.messages.memory import MemoryFilter
from m3.store.filters import isolation_clause
from m3.store.memories import chunks
from m3.store.schema import entities as e
from m3.store.schema import entity_mentions as mn
from m3.store.schema import entity_relations as rel
from m3.store.schema import entity_stale as st
from m3.store.schema import entity_watermark as wm
from m3.store.schema import memories as m

#: The most spellings an entity shows besides its name, and the most merge hops followed.
MAX_ALIASES = 20
MAX_MERGE_HOPS = 16
#: Characters of text shown on each side of a mention.
SNIPPET_CHARS = 60
#: The most edges read per hop of entity_graph (before max_nodes bounds the nodes).
EDGES_PER_HOP = 2000

ENTITY_COLUMNS = ("id", "name", "type", "scope", "agent_id", "user_id", "created_at", "updated_at")


def visible_memory(flt: MemoryFilter) -> ColumnElement[bool]:
    """Current memories the reader of ``flt`` may read."""
    return and_(m.c.retired_at.is_(None), isolation_clause(flt))


def indexed_text(title: str | None, content: str) -> str:
    """The text extraction reads of a memory (the spans of its mentions point into it)."""
    return f"{title}\n\n{content}" if title else content


def watermark(conn: Connection) -> int:
    """The ``memories.seq`` up to which every memory was indexed (0 on a fresh store)."""
    return int(conn.execute(select(wm.c.seq).where(wm.c.id == 1)).scalar() or 0)


#: The memory columns the entity pass reads (extraction, owner, valid time, whether it is current).
_PASS_COLUMNS = (m.c.seq, m.c.id, m.c.title, m.c.content, m.c.scope, m.c.agent_id, m.c.user_id, m.c.valid_from,
                 m.c.valid_to, m.c.retired_at)


def backlog(conn: Connection, after: int, limit: int) -> list[dict[str, Any]]:
    """The next ``limit`` memories after ``after`` (retired ones too: the watermark moves past them)."""
    return [dict(row) for row in conn.execute(
        select(*_PASS_COLUMNS).where(m.c.seq > after).order_by(m.c.seq).limit(limit)).mappings()]


def backlog_size(conn: Connection, after: int) -> int:
    return int(conn.execute(select(func.count()).select_from(m).where(m.c.seq > after)).scalar_one())


def stale_size(conn: Connection) -> int:
    """How many notes of memories to read again wait."""
    return int(conn.execute(select(func.count()).select_from(st)).scalar_one())


def stale(conn: Connection, limit: int) -> list[dict[str, Any]]:
    """The oldest ``limit`` notes of memories to read again (``entity_stale``, migration 0017): ``note`` (its
    seq), ``memory_id`` and the memory's pass columns (``id`` None when it was erased since)."""
    return [dict(row) for row in conn.execute(
        select(st.c.seq.label("note"), st.c.memory_id, *[c for c in _PASS_COLUMNS if c.name != "seq"])
        .select_from(st.outerjoin(m, m.c.id == st.c.memory_id)).order_by(st.c.seq).limit(limit)).mappings()]


def visible_mentions(flt: MemoryFilter) -> Any:
    """The outer entity's visible mentions, counted through the mention index (a scalar subquery)."""
    return (select(func.count()).select_from(mn.join(m, m.c.id == mn.c.memory_id))
            .where(mn.c.entity_id == e.c.id, visible_memory(flt)).scalar_subquery())


def _summaries(conn: Connection, query: Select[Any], flt: MemoryFilter) -> list[dict[str, Any]]:
    return with_aliases(conn, [dict(row) for row in conn.execute(query).mappings()], flt)


def with_aliases(conn: Connection, found: list[dict[str, Any]], flt: MemoryFilter) -> list[dict[str, Any]]:
    """Entity rows (``ENTITY_COLUMNS``, ``merged_aliases``, ``n``) as summaries: the merged names and the
    visible spellings as ``aliases``, ``n`` as ``mentions``."""
    surfaces = _surfaces(conn, [row["id"] for row in found], flt)
    for row in found:
        spelled = [s for s in surfaces.get(row["id"], []) if s != row["name"]]
        row["aliases"] = list(dict.fromkeys([*(row.pop("merged_aliases") or []), *spelled]))[:MAX_ALIASES]
        row["mentions"] = int(row.pop("n"))
    return found


def _counted(where: Any, flt: MemoryFilter) -> tuple[Select[Any], Any]:
    """Entities satisfying ``where`` with their visible mentions counted (``n``; those with none left out):
    the query of the summary columns, and the subquery it reads (with ``norm``) to order by."""
    listed = (select(*(e.c[c] for c in ENTITY_COLUMNS), e.c.norm, e.c.aliases.label("merged_aliases"),
                     func.count().label("n"))
              # ``id || ''``: the entities found by ``where`` drive the loop; without statistics SQLite would
              # otherwise read every mention of the store and look its entity up (2.5 s at 100k memories).
              .select_from(e.join(mn, mn.c.entity_id == e.c.id.concat("")).join(m, m.c.id == mn.c.memory_id))
              .where(where, visible_memory(flt)).group_by(e.c.seq).subquery())
    return select(*(listed.c[c] for c in (*ENTITY_COLUMNS, "merged_aliases", "n"))), listed


#: Another name for the mention table, to find one visible mention of a spelling.
_SEEN = mn.alias("seen")
#: The distinct spellings of the entities ``:ids`` names (mentions alone, no memory read).
_SPELLED = select(mn.c.entity_id, mn.c.surface).distinct().where(
    mn.c.entity_id.in_(bindparam("ids", expanding=True))).subquery()


def _surfaces(conn: Connection, ids: Sequence[str], flt: MemoryFilter) -> dict[str, list[str]]:
    """entity id -> the distinct spellings of its visible mentions."""
    out: dict[str, list[str]] = {}
    # The distinct spellings first, then one visible mention of each: an entity mentioned thousands of times has
    # a few spellings, and only those need a memory read.
    # A scalar subquery, not EXISTS: PostgreSQL would turn EXISTS into a semi-join that hashes every spelling
    # of the store with its memory (1 s at 100k memories) instead of looking for one mention per spelling.
    seen = (select(_SEEN.c.seq).select_from(_SEEN.join(m, m.c.id == _SEEN.c.memory_id))
            .where(_SEEN.c.entity_id == _SPELLED.c.entity_id, _SEEN.c.surface == _SPELLED.c.surface,
                   visible_memory(flt)).limit(1).scalar_subquery().is_not(None))
    q = select(_SPELLED.c.entity_id, _SPELLED.c.surface).where(seen).order_by(_SPELLED.c.entity_id,
                                                                              _SPELLED.c.surface)
    for chunk in chunks(ids):
        for entity_id, surface in conn.execute(q, {"ids": chunk}):
            out.setdefault(entity_id, []).append(surface)
    return out


def search(conn: Connection, query: str, type_: str | None, limit: int, flt: MemoryFilter) -> list[dict[str, Any]]:
    """Visible entities whose name contains ``query`` (any case): exact, then prefix, then most mentioned.
    Mentions are counted only for the entities whose name matches."""
    wanted = normalise(query)
    where = [e.c.norm.contains(wanted, autoescape=True)] + ([e.c.type == type_] if type_ is not None else [])
    q, listed = _counted(and_(*where), flt)
    rank = case((listed.c.norm == wanted, 0), (listed.c.norm.startswith(wanted, autoescape=True), 1), else_=2)
    return _summaries(conn, q.order_by(rank, listed.c.n.desc(), listed.c.norm, listed.c.id).limit(limit), flt)


def summaries(conn: Connection, ids: Iterable[str], flt: MemoryFilter) -> dict[str, dict[str, Any]]:
    """id -> summary of those of ``ids`` that are visible."""
    wanted = sorted(set(ids))
    out: dict[str, dict[str, Any]] = {}
    for chunk in chunks(wanted):
        q, _ = _counted(e.c.id.in_(chunk), flt)
        for row in _summaries(conn, q, flt):
            out[row["id"]] = row
    return out


def resolve(conn: Connection, ref: str, flt: MemoryFilter) -> tuple[dict[str, Any], str | None]:
    """The visible entity ``ref`` names (following merges) and, when ``ref`` was merged, ``ref``; not_found
    otherwise -- also for an entity only memories hidden from the reader mention."""
    current, merged_from = ref, None
    for _hop in range(MAX_MERGE_HOPS):
        target = conn.execute(select(e.c.merged_into).where(e.c.id == current)).first()
        if target is None or target[0] is None:
            break
        merged_from, current = ref, target[0]
    found = summaries(conn, [current], flt).get(current) if current else None
    if found is None:
        raise NotFound(f"no entity {ref!r} among those your memories name",
                       hint="Find entities with entity_search or entity_list; run entity_extract after new writes.",
                       details={"id": ref})
    return found, merged_from


def mentions(conn: Connection, entity_id: str, limit: int, flt: MemoryFilter) -> list[dict[str, Any]]:
    """The entity's visible mentions, the newest memories first, each with the text around it."""
    rows = conn.execute(
        select(mn.c.memory_id, mn.c.span_start, mn.c.span_end, mn.c.surface, m.c.title, m.c.content)
        .select_from(mn.join(m, m.c.id == mn.c.memory_id))
        .where(mn.c.entity_id == entity_id, visible_memory(flt))
        .order_by(m.c.seq.desc(), mn.c.span_start).limit(limit)).mappings()
    out = []
    for row in rows:
        text = indexed_text(row["title"], row["content"])
        lo, hi = max(0, row["span_start"] - SNIPPET_CHARS), row["span_end"] + SNIPPET_CHARS
        out.append({"memory_id": row["memory_id"], "span_start": row["span_start"], "span_end": row["span_end"],
                    "surface": row["surface"], "snippet": " ".join(text[lo:hi].split())})
    return out


def relations(conn: Connection, flt: MemoryFilter, *, entity_ids: Sequence[str] | None = None,
              predicate: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """Visible relations (their memory is), the newest first; with ``entity_ids``, those touching one of them."""
    subject, obj = aliased(e), aliased(e)
    q = (select(rel.c.id, rel.c.subject_id, subject.c.name.label("subject_name"), rel.c.predicate,
                rel.c.object_id, obj.c.name.label("object_name"), rel.c.valid_from, rel.c.valid_to, rel.c.memory_id)
         .select_from(rel.join(m, m.c.id == rel.c.memory_id)
                      .join(subject, subject.c.id == rel.c.subject_id).join(obj, obj.c.id == rel.c.object_id))
         .where(visible_memory(flt)))
    if entity_ids is not None:
        q = q.where(or_(rel.c.subject_id.in_(list(entity_ids)), rel.c.object_id.in_(list(entity_ids))))
    if predicate is not None:
        q = q.where(rel.c.predicate == predicate)
    return [dict(row) for row in conn.execute(q.order_by(rel.c.seq.desc()).limit(limit)).mappings()]


def co_mentions(conn: Connection, entity_ids: Sequence[str], flt: MemoryFilter, limit: int
                ) -> list[tuple[str, str, str, int]]:
    """(entity, other entity, a memory naming both, how many) for visible memories naming one of ``entity_ids``."""
    other = aliased(mn)
    q = (select(mn.c.entity_id, other.c.entity_id, func.min(mn.c.memory_id),
                func.count(func.distinct(mn.c.memory_id)))
         .select_from(mn.join(other, and_(other.c.memory_id == mn.c.memory_id, other.c.entity_id != mn.c.entity_id))
                      .join(m, m.c.id == mn.c.memory_id))
         .where(mn.c.entity_id.in_(list(entity_ids)), visible_memory(flt))
         .group_by(mn.c.entity_id, other.c.entity_id)
         .order_by(func.count(func.distinct(mn.c.memory_id)).desc(), mn.c.entity_id, other.c.entity_id).limit(limit))
    return [(a, b, memory_id, int(n)) for a, b, memory_id, n in conn.execute(q)]
