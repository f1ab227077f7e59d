"""Changes of the entity graph, inside the Writer's transaction: indexing a batch of memories, dropping what
retired memories mentioned, merging and unmerging, and erasing what only a forgotten subject mentioned.

Entities are kept per owner partition (``<scope>|<agent if scope=agent>|<user>``): a name found in an agent's
private memory becomes (or joins) that agent's own entity, never a shared one, so a shared entity's name and
spellings come from shared memories only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, exists, insert, or_, select, update

from m3.errors import Forbidden, InvalidArgument
from m3.protocols.messages.entities import (
    FoundMention,
    IndexedMemory,
    IndexEntities,
    MergeEntities,
    UnmergeEntities,
    normalise,
)
from m3.protocols.messages.memory import MemoryFilter
from m3.protocols.tools.entities import EntityMergeResult, summary
from m3.store import entities as reads
from m3.store.direct import DirectInsert
from m3.store.memories import chunks
from m3.store.schema import entities as e
from m3.store.schema import entity_mentions as mn
from m3.store.schema import entity_merges as mg
from m3.store.schema import entity_relations as rel
from m3.store.schema import entity_stale as st
from m3.store.schema import entity_watermark as wm
from m3.store.schema import memories as m

#: Longest name, spelling and predicate kept (the columns' sizes).
NAME_CHARS, PREDICATE_CHARS = 300, 64


def partition_of(scope: str, agent_id: str | None, user_id: str | None) -> str:
    """The owner partition of an entity named in a memory of this owner."""
    return f"{scope}|{agent_id or '' if scope == 'agent' else ''}|{user_id or ''}"


def _set_watermark(conn: Connection, seq: int, now: datetime) -> None:
    if conn.execute(update(wm).where(wm.c.id == 1).values(seq=seq, updated_at=now)).rowcount == 0:
        conn.execute(insert(wm).values(id=1, seq=seq, updated_at=now))


def index(conn: Connection, msg: IndexEntities, now: datetime) -> dict[str, int]:
    """Replace the mentions and relations of ``msg.memories`` that are still current, drop those of the memories
    read again (``msg.again``) with the entities nobody mentions any more, delete the notes handled and move the
    watermark forward; counts.

    A batch costs a few statements, not a few per mention: the entities every mention names are looked up
    together, the new ones inserted in one executemany, merges followed for all at once, and the mentions and
    relations inserted in one executemany each (the Writer indexed about 300 memories a second when every
    mention ran its own statements, docs/benchmarks.md "Entity indexing"). Retired memories are found through
    their notes (migration 0017), not by reading every memory ever retired."""
    counts = dict.fromkeys(("memories", "mentions", "relations", "entities_created", "dropped_mentions",
                            "dropped_entities"), 0)
    again = list(dict.fromkeys(msg.again))
    dropped = _drop_mentions(conn, again)
    read_again = set(again)
    ids = [mem.memory_id for mem in msg.memories if mem.memory_id not in read_again]
    touched = _drop_mentions(conn, ids)
    current = _current(conn, [mem.memory_id for mem in msg.memories])
    todo = [mem for mem in msg.memories if mem.memory_id in current]
    resolved, counts["entities_created"] = _resolve(conn, todo, now)
    mentions: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    for mem, entity_ids in zip(todo, resolved, strict=True):
        mentions += _mentions_of(mem, entity_ids)
        relations += _relations_of(mem, entity_ids, now)
    _INSERT_MENTIONS(conn, mentions)
    _INSERT_RELATIONS(conn, relations)
    counts.update(memories=len(todo), mentions=len(mentions), relations=len(relations))
    counts["dropped_mentions"] = len(dropped)
    counts["dropped_entities"] = drop_unmentioned(conn, {eid for eid, _ in dropped} | {eid for eid, _ in touched})
    for part in chunks(list(msg.notes)):
        conn.execute(delete(st).where(st.c.seq.in_(part)))
    if msg.watermark > reads.watermark(conn):
        _set_watermark(conn, msg.watermark, now)
    return counts


_INSERT_ENTITIES = DirectInsert(e, ["id", "name", "norm", "type", "aliases", "created_at", "updated_at", "scope",
                                   "agent_id", "user_id", "partition"])
_INSERT_MENTIONS = DirectInsert(mn, ["entity_id", "memory_id", "span_start", "span_end", "surface"])
_INSERT_RELATIONS = DirectInsert(rel, ["id", "subject_id", "predicate", "object_id", "valid_from", "valid_to",
                                       "memory_id", "created_at"])
EntityKey = tuple[str, str, str]  # partition, type, normalised name


def _current(conn: Connection, ids: list[str]) -> set[str]:
    """Those of ``ids`` that are current memories (one retired or erased since it was read is not indexed)."""
    out: set[str] = set()
    for chunk in chunks(ids):
        out.update(conn.execute(select(m.c.id).where(m.c.id.in_(chunk), m.c.retired_at.is_(None))).scalars())
    return out


def _drop_mentions(conn: Connection, memory_ids: Any) -> list[tuple[str, int]]:
    """Delete the mentions and relations of ``memory_ids`` (a list or a select); (entity, seq) of each mention."""
    if isinstance(memory_ids, list) and not memory_ids:
        return []
    gone = [(row[0], row[1]) for row in conn.execute(
        select(mn.c.entity_id, mn.c.seq).where(mn.c.memory_id.in_(memory_ids)))]
    if gone:
        conn.execute(delete(mn).where(mn.c.memory_id.in_(memory_ids)))
    conn.execute(delete(rel).where(rel.c.memory_id.in_(memory_ids)))
    return gone


def _owner(mem: IndexedMemory) -> dict[str, Any]:
    return {"scope": mem.scope, "agent_id": mem.agent_id if mem.scope == "agent" else None,
            "user_id": mem.user_id, "partition": partition_of(mem.scope, mem.agent_id, mem.user_id)}


def _key(mem: IndexedMemory, found: FoundMention) -> EntityKey:
    return (partition_of(mem.scope, mem.agent_id, mem.user_id), found.type, normalise(found.name[:NAME_CHARS]))


def _resolve(conn: Connection, mems: list[IndexedMemory], now: datetime) -> tuple[list[list[str]], int]:
    """Per memory, the entity each of its mentions names in the memory's owner partition (merges followed), and
    how many entities had to be created for them (in the order first named)."""
    wanted: dict[EntityKey, tuple[str, dict[str, Any]]] = {}
    for mem in mems:
        for found in mem.mentions:
            wanted.setdefault(_key(mem, found), (found.name[:NAME_CHARS], _owner(mem)))
    known = _existing(conn, list(wanted))
    new = [{"id": str(uuid.uuid4()), "name": name, "norm": key[2], "type": key[1], "aliases": [], "created_at": now,
            "updated_at": now, **owner} for key, (name, owner) in wanted.items() if key not in known]
    _INSERT_ENTITIES(conn, new)
    final = _follow_merges(conn, {entity_id: into for entity_id, into in known.values()})
    ids = {key: final[known[key][0]] for key in known}
    ids.update({(row["partition"], row["type"], row["norm"]): row["id"] for row in new})
    return [[ids[_key(mem, found)] for found in mem.mentions] for mem in mems], len(new)


def _existing(conn: Connection, keys: list[EntityKey]) -> dict[EntityKey, tuple[str, str | None]]:
    """The stored entities of ``keys``: key -> (id, the entity it was merged into)."""
    wanted = set(keys)
    out: dict[EntityKey, tuple[str, str | None]] = {}
    for chunk in chunks(sorted({key[2] for key in keys})):
        for row in conn.execute(select(e.c.id, e.c.partition, e.c.type, e.c.norm, e.c.merged_into)
                                .where(e.c.norm.in_(chunk))):
            key = (row.partition, row.type, row.norm)
            if key in wanted:
                out[key] = (row.id, row.merged_into)
    return out


def _follow_merges(conn: Connection, merged_into: dict[str, str | None]) -> dict[str, str]:
    """Each entity id -> the entity it was merged into, followed for at most ``MAX_MERGE_HOPS`` hops (itself if
    it was never merged); ``merged_into`` gives each one's first hop."""
    at = {entity_id: entity_id for entity_id in merged_into}
    step = dict(merged_into)
    for _hop in range(reads.MAX_MERGE_HOPS):
        moving = {entity_id for entity_id, into in step.items() if into is not None}
        if not moving:
            break
        for entity_id in moving:
            at[entity_id] = step[entity_id]  # type: ignore[assignment]  # not None: it is moving
        onward = _merged_into(conn, {at[entity_id] for entity_id in moving})
        step = {entity_id: onward.get(at[entity_id]) if entity_id in moving else None for entity_id in step}
    return at


def _merged_into(conn: Connection, ids: set[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for chunk in chunks(sorted(ids)):
        out.update((row.id, row.merged_into) for row in conn.execute(
            select(e.c.id, e.c.merged_into).where(e.c.id.in_(chunk))))
    return out


def _mentions_of(mem: IndexedMemory, entity_ids: list[str]) -> list[dict[str, Any]]:
    """The mention rows of ``mem``: one per entity and start (two names of one entity at one place count once)."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for entity_id, found in zip(entity_ids, mem.mentions, strict=True):
        rows.setdefault((entity_id, found.start), {"entity_id": entity_id, "memory_id": mem.memory_id,
                                                    "span_start": found.start, "span_end": found.end,
                                                    "surface": found.surface[:NAME_CHARS]})
    return list(rows.values())


def _relations_of(mem: IndexedMemory, entity_ids: list[str], now: datetime) -> list[dict[str, Any]]:
    return [{"id": str(uuid.uuid4()), "subject_id": entity_ids[fact.subject],
             "predicate": fact.predicate[:PREDICATE_CHARS], "object_id": entity_ids[fact.object],
             "valid_from": mem.valid_from, "valid_to": mem.valid_to, "memory_id": mem.memory_id, "created_at": now}
            for fact in mem.relations if entity_ids[fact.subject] != entity_ids[fact.object]]


def drop_unmentioned(conn: Connection, entity_ids: Iterable[str]) -> int:
    """Delete those of ``entity_ids`` that no memory mentions and that were not merged into another (the merged
    ones go with their target, by foreign key), with the merge records naming them; how many."""
    dropped = 0
    for chunk in chunks(sorted(set(entity_ids))):
        lone = list(conn.execute(select(e.c.id).where(
            e.c.id.in_(chunk), e.c.merged_into.is_(None), ~exists().where(mn.c.entity_id == e.c.id))).scalars())
        if lone:
            dropped += conn.execute(delete(e).where(e.c.id.in_(lone))).rowcount
    if dropped:
        conn.execute(delete(mg).where(or_(~exists().where(e.c.id == mg.c.source_id),
                                          ~exists().where(e.c.id == mg.c.target_id))))
    return dropped


def mentioned_by(conn: Connection, memory_ids: Any) -> set[str]:
    """The entities the memories ``memory_ids`` (a select) mention: gdpr_forget checks them after the erasure."""
    return set(conn.execute(select(mn.c.entity_id).where(mn.c.memory_id.in_(memory_ids)).distinct()).scalars())


# -- merges --------------------------------------------------------------------------------------------------


def _mergeable(conn: Connection, ref: str, flt: MemoryFilter) -> dict[str, Any]:
    """The visible, unmerged entity ``ref``; a private one only for its own agent."""
    found, merged_from = reads.resolve(conn, ref, flt)
    if merged_from is not None:
        raise InvalidArgument(f"entity {ref} was merged into {found['id']} already",
                              hint="Merge the entity it was merged into, or entity_unmerge it first.",
                              details={"id": ref, "merged_into": found["id"]})
    if flt.enforce_isolation and found["scope"] == "agent" and found["agent_id"] != flt.reader_agent_id:
        raise Forbidden(f"entity {ref} belongs to agent {found['agent_id']!r}; only it may merge it",
                        details={"id": ref})
    return found


def merge(conn: Connection, source_id: str, target_id: str, *, actor: str | None, now: datetime,
          flt: MemoryFilter) -> dict[str, Any]:
    """Fold ``source_id`` into ``target_id``: mentions and relations move, its name becomes an alias, the record
    keeps what moved (for unmerge)."""
    source, target = _mergeable(conn, source_id, flt), _mergeable(conn, target_id, flt)
    if source["id"] == target["id"]:
        raise InvalidArgument("an entity cannot be merged into itself", details={"id": source_id})
    parts = dict(conn.execute(select(e.c.id, e.c.partition).where(e.c.id.in_([source["id"], target["id"]]))).all())
    if parts[source["id"]] != parts[target["id"]]:
        raise InvalidArgument("the two entities have different owners (one is private, or of another user)",
                              hint="Merge entities of the same scope and owner.",
                              details={"source_id": source_id, "target_id": target_id})
    moved = [s for s in conn.execute(select(mn.c.seq).where(mn.c.entity_id == source["id"])).scalars()]
    subjects = list(conn.execute(select(rel.c.id).where(rel.c.subject_id == source["id"])).scalars())
    objects = list(conn.execute(select(rel.c.id).where(rel.c.object_id == source["id"])).scalars())
    conn.execute(update(mn).where(mn.c.entity_id == source["id"]).values(entity_id=target["id"]))
    conn.execute(update(rel).where(rel.c.subject_id == source["id"]).values(subject_id=target["id"]))
    conn.execute(update(rel).where(rel.c.object_id == source["id"]).values(object_id=target["id"]))
    own = conn.execute(select(e.c.aliases, e.c.name).where(e.c.id == source["id"])).one()
    added = [a for a in dict.fromkeys([own.name, *own.aliases]) if a != target["name"]]
    current = conn.execute(select(e.c.aliases).where(e.c.id == target["id"])).scalar_one()
    conn.execute(update(e).where(e.c.id == target["id"]).values(
        aliases=list(dict.fromkeys([*current, *added])), updated_at=now))
    conn.execute(update(e).where(e.c.id == source["id"]).values(merged_into=target["id"], updated_at=now))
    conn.execute(insert(mg).values(source_id=source["id"], target_id=target["id"], actor=actor, at=now, details={
        "mentions": moved, "subject_of": subjects, "object_of": objects, "aliases": added}))
    return _result(conn, source["id"], target["id"], len(moved), len(subjects) + len(objects), actor, now, flt)


def unmerge(conn: Connection, source_id: str, *, actor: str | None, now: datetime, flt: MemoryFilter
            ) -> dict[str, Any]:
    """Undo the latest merge of ``source_id``: what it moved (and is still on the target) goes back."""
    _target, merged_from = reads.resolve(conn, source_id, flt)
    into = conn.execute(select(e.c.merged_into).where(e.c.id == source_id)).scalar()
    if merged_from is None or into is None:
        raise InvalidArgument(f"entity {source_id} is not merged into another", details={"id": source_id})
    _mergeable(conn, into, flt)
    record = conn.execute(select(mg.c.seq, mg.c.details).where(mg.c.source_id == source_id, mg.c.target_id == into)
                          .order_by(mg.c.seq.desc()).limit(1)).one()
    d = record.details
    back = conn.execute(update(mn).where(mn.c.seq.in_(d["mentions"]), mn.c.entity_id == into)
                        .values(entity_id=source_id)).rowcount if d["mentions"] else 0
    moved = back
    for column, ids in ((rel.c.subject_id, d["subject_of"]), (rel.c.object_id, d["object_of"])):
        if ids:
            moved += conn.execute(update(rel).where(rel.c.id.in_(ids), column == into)
                                  .values({column.name: source_id})).rowcount
    aliases = conn.execute(select(e.c.aliases).where(e.c.id == into)).scalar_one()
    conn.execute(update(e).where(e.c.id == into).values(
        aliases=[a for a in aliases if a not in set(d["aliases"])], updated_at=now))
    conn.execute(update(e).where(e.c.id == source_id).values(merged_into=None, updated_at=now))
    conn.execute(insert(mg).values(source_id=source_id, target_id=into, actor=actor, at=now,
                                   details={"undid": record.seq}))
    done = _result(conn, source_id, into, back, moved - back, actor, now, flt)
    drop_unmentioned(conn, [into])  # a target named only by what it had taken over
    return done


def _result(conn: Connection, source_id: str, target_id: str, mentions: int, relations: int, actor: str | None,
            now: datetime, flt: MemoryFilter) -> dict[str, Any]:
    target = reads.summaries(conn, [target_id], flt).get(target_id)
    if target is None:  # every mention moved back to the source (unmerge): the target is shown bare
        row = conn.execute(select(*(e.c[c] for c in reads.ENTITY_COLUMNS), e.c.aliases).where(
            e.c.id == target_id)).mappings().one()
        target = {**row, "mentions": 0}
    return {"source_id": source_id, "target": target, "moved_mentions": mentions, "moved_relations": relations,
            "at": now, "by": actor}


def merge_request(conn: Connection, msg: MergeEntities, now: datetime) -> EntityMergeResult:
    """The Writer's entity_merge."""
    done = merge(conn, msg.source_id, msg.target_id, actor=msg.actor, now=now, flt=msg.filter)
    return EntityMergeResult(**{**done, "target": summary(done["target"])})


def unmerge_request(conn: Connection, msg: UnmergeEntities, now: datetime) -> EntityMergeResult:
    """The Writer's entity_unmerge."""
    done = unmerge(conn, msg.source_id, actor=msg.actor, now=now, flt=msg.filter)
    return EntityMergeResult(**{**done, "target": summary(done["target"])})
