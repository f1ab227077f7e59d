"""Row-level operations on memories, their history and their links.

Functions take an open connection inside the caller's transaction and never
commit: the Writer decides transaction boundaries (group commit).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    RowMapping,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)

from m3.errors import AmbiguousId, NotFound, NotShared
from m3.protocols.messages.memory import MemoryFilter, NewMemory
from m3.protocols.tools.memory import MemoryRecord
from m3.store.dialect import dialect_for
from m3.store.direct import DirectInsert
from m3.store.filters import FIELDS, field_clauses, isolation_clause, time_clause
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e
from m3.store.schema import memory_history as h
from m3.store.schema import memory_relationships as r

T = TypeVar("T")

PREFIX_MIN = 8
#: Ids per IN list, well below the bound-parameter limits of both dialects.
CHUNK = 500


def content_hash(content: str) -> str:
    """SHA-256 of the content's UTF-8 bytes, hex."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def new_id() -> str:
    return str(uuid.uuid4())


def chunks(ids: Sequence[T]) -> Iterator[list[T]]:
    """``ids`` in lists of at most :data:`CHUNK`."""
    for start in range(0, len(ids), CHUNK):
        yield list(ids[start:start + CHUNK])


def resolve_id(conn: Connection, ref: str, flt: MemoryFilter) -> str:
    """The full id for ``ref`` (a full id or a unique prefix of 8+ characters).

    Raises NotFound or AmbiguousId. Rows hidden by isolation count as absent.
    """
    visible = isolation_clause(flt)
    ref = ref.strip().lower()
    if conn.execute(select(m.c.id).where(m.c.id == ref, visible)).first():
        return ref
    if len(ref) < PREFIX_MIN:
        raise NotFound(f"no memory with id {ref!r}", hint=f"Give the full id or at least {PREFIX_MIN} characters.")
    found = [row[0] for row in conn.execute(select(m.c.id).where(m.c.id.startswith(ref, autoescape=True), visible)
                                            .limit(6))]
    if not found:
        raise NotFound(f"no memory with id or prefix {ref!r}")
    if len(found) > 1:
        raise AmbiguousId(f"prefix {ref!r} matches {len(found)} memories", details={"candidates": found[:5]})
    return str(found[0])


def shareable(conn: Connection, refs: Iterable[str], sender: MemoryFilter, audience: str | None) -> list[str]:
    """Full ids of ``refs`` as the ``sender`` filter sees them; with isolation on, each must be visible to ``audience``.

    ``audience`` None means every agent (task results). The check is the store's isolation clause.
    """
    ids = [resolve_id(conn, ref, sender) for ref in refs]
    if sender.enforce_isolation:
        for memory_id in ids:
            try:
                resolve_id(conn, memory_id, MemoryFilter(reader_agent_id=audience, enforce_isolation=True))
            except NotFound:
                who = f"agent {audience!r}" if audience else "the other agents"
                raise NotShared(f"memory {memory_id} is private to its agent (scope=agent); {who} could not read it",
                                details={"memory_id": memory_id}) from None
    return ids


def load(conn: Connection, memory_id: str) -> RowMapping:
    row = conn.execute(select(m).where(m.c.id == memory_id)).mappings().first()
    if row is None:
        raise NotFound(f"no memory with id {memory_id!r}")
    return row


def without_seq(row: RowMapping) -> dict[str, Any]:
    """A row as callers see it: every column but the internal ``seq``."""
    return {k: v for k, v in row.items() if k != "seq"}


def record(row: RowMapping) -> MemoryRecord:
    """A memory row as the caller gets it."""
    return MemoryRecord.model_validate(without_seq(row))


DuplicateKey = tuple[str, str, str | None, str | None, str | None]  # hash, type, agent, user, conversation


def duplicate_key(mem: NewMemory, digest: str) -> DuplicateKey:
    return (digest, mem.type, mem.agent_id, mem.user_id, mem.conversation_id)


# Statements built once: SQLAlchemy caches their compiled form, so a write pays for binding values only.
# ``type || ''`` and ``conversation_id || ''``, not the bare columns: SQLite keeps no statistics, so it
# would drive the lookup from the (type, agent, user) or the conversation index and read every memory of
# that type or conversation on each group commit (64 writers of notes slowed to half by 12,000 notes,
# docs/benchmarks.md); through the content-hash index it reads only the matches.
_CURRENT_BY_HASH = select(
    m.c.id, m.c.content_hash, m.c.recorded_at, m.c.type, m.c.agent_id, m.c.user_id, m.c.conversation_id,
    m.c.archived_at, m.c.archive_reason, m.c.expires_at,
).where(m.c.content_hash.in_(bindparam("digests", expanding=True)), m.c.retired_at.is_(None),
        m.c.type.concat("").in_(bindparam("types", expanding=True))).order_by(m.c.seq)
# A text repeated in many conversations ("Thanks!") must not bring back every one of them.
_CURRENT_BY_HASH_IN = _CURRENT_BY_HASH.where(
    m.c.conversation_id.concat("").in_(bindparam("conversations", expanding=True)))
# Run on the DB-API cursor: every write runs both (m3.store.direct).
_INSERT_MEMORY = DirectInsert(m, [c.key for c in m.c if c.key not in ("seq", "archived_at", "archive_reason")])
_INSERT_HISTORY = DirectInsert(h, ["memory_id", "event", "actor", "at", "details"])


def find_duplicates(conn: Connection, wanted: Sequence[tuple[NewMemory, str]]) -> dict[DuplicateKey, RowMapping]:
    """For (memory, content hash) pairs: the current memory with the same content, type, owner and
    conversation, keyed by :func:`duplicate_key` (absent when there is none). One query per :data:`CHUNK` hashes."""
    keys = {duplicate_key(mem, digest) for mem, digest in wanted}
    digests = sorted({key[0] for key in keys})
    params: dict[str, Any] = {"types": sorted({key[1] for key in keys})}
    conversations = {key[4] for key in keys}
    query = _CURRENT_BY_HASH
    if None not in conversations:
        query, params["conversations"] = _CURRENT_BY_HASH_IN, sorted(conversations)
    found: dict[DuplicateKey, RowMapping] = {}
    for chunk in chunks(digests):
        for row in conn.execute(query, {**params, "digests": chunk}).mappings():
            key = (row["content_hash"], row["type"], row["agent_id"], row["user_id"], row["conversation_id"])
            if key in keys:
                found.setdefault(key, row)
    return found


def _same(column: Any, value: str | None) -> Any:
    return column.is_(None) if value is None else column == value


def memory_values(mem: NewMemory, *, memory_id: str, digest: str, now: datetime) -> dict[str, Any]:
    """The column values of a new memory row."""
    return {
        "id": memory_id, "type": mem.type, "title": mem.title, "content": mem.content,
        "metadata": dict(mem.metadata), "scope": mem.scope, "agent_id": mem.agent_id, "user_id": mem.user_id,
        "importance": mem.importance, "pinned": mem.pinned, "expires_at": mem.expires_at,
        "content_hash": digest, "access_count": 0, "last_accessed_at": None,
        "conversation_id": mem.conversation_id, "source": mem.source, "valid_from": mem.valid_from or now,
        "valid_to": None, "recorded_at": now, "retired_at": None, "retire_reason": None, "superseded_by": None,
    }


def insert_memories(conn: Connection, values: Sequence[dict[str, Any]]) -> None:
    """Insert rows built by :func:`memory_values` (one executemany)."""
    _INSERT_MEMORY(conn, values)


def record_events(conn: Connection, events: Sequence[dict[str, Any]]) -> None:
    """Append history rows: dicts of memory_id, event, actor, at, details."""
    _INSERT_HISTORY(conn, events)


def event(memory_id: str, name: str, actor: str | None, at: datetime, **details: Any) -> dict[str, Any]:
    return {"memory_id": memory_id, "event": name, "actor": actor, "at": at, "details": details}


def retire(conn: Connection, memory_id: str, *, at: datetime, reason: str,
           superseded_by: str | None = None, valid_to: datetime | None = None) -> bool:
    """Close a current memory. False when it was already retired (someone else won)."""
    values: dict[str, Any] = {"retired_at": at, "retire_reason": reason, "superseded_by": superseded_by}
    if valid_to is not None:
        values["valid_to"] = valid_to
    result = conn.execute(update(m).where(m.c.id == memory_id, m.c.retired_at.is_(None)).values(**values))
    return bool(result.rowcount)


def unretire(conn: Connection, memory_id: str) -> None:
    """Make a retired memory current again: it holds from its valid_from on, open-ended."""
    conn.execute(update(m).where(m.c.id == memory_id).values(retired_at=None, retire_reason=None,
                                                             superseded_by=None, valid_to=None))


def archive_version(conn: Connection, row: RowMapping, *, at: datetime) -> str:
    """Keep ``row`` as it is now as a retired version of itself (a new id, superseded by ``row``), before
    ``row`` changes in place: ``as_of`` before ``at`` then sees the copy, and the chain runs through it."""
    copy_id = new_id()
    values = without_seq(row)
    values.update(id=copy_id, retired_at=at, retire_reason="updated", superseded_by=row["id"])
    conn.execute(insert(m).values(**values))
    # The copy takes the row's place in its chain: what the row superseded, the copy superseded.
    conn.execute(update(m).where(m.c.superseded_by == row["id"], m.c.id != copy_id).values(superseded_by=copy_id))
    conn.execute(update(r).where(r.c.from_id == row["id"], r.c.type == "supersedes").values(from_id=copy_id))
    conn.execute(insert(e).from_select(
        [c.name for c in e.c if c.name != "seq"],
        select(*[(literal(copy_id) if c.name == "memory_id" else c) for c in e.c if c.name != "seq"])
        .where(e.c.memory_id == row["id"])))
    link(conn, row["id"], copy_id, "supersedes", at=at, actor=None)
    return copy_id


def update_fields(conn: Connection, memory_id: str, changes: dict[str, Any]) -> None:
    if "content" in changes:
        changes = {**changes, "content_hash": content_hash(changes["content"])}
    conn.execute(update(m).where(m.c.id == memory_id).values(**changes))


def hard_delete(conn: Connection, memory_id: str) -> None:
    # History, vectors, grants, conflicts and links both ways go with the row (ON DELETE CASCADE).
    conn.execute(update(m).where(m.c.superseded_by == memory_id).values(superseded_by=None))
    conn.execute(delete(m).where(m.c.id == memory_id))


def link(conn: Connection, from_id: str, to_id: str, rel_type: str, *, at: datetime, actor: str | None) -> bool:
    """Add an edge; False when it already existed."""
    exists = conn.execute(select(r.c.seq).where(
        r.c.from_id == from_id, r.c.to_id == to_id, r.c.type == rel_type)).first()
    if exists:
        return False
    conn.execute(insert(r).values(from_id=from_id, to_id=to_id, type=rel_type, created_at=at, created_by=actor))
    return True


def unlink(conn: Connection, from_id: str, to_id: str, rel_type: str | None) -> list[str]:
    """Remove the edges ``from_id`` → ``to_id`` (of ``rel_type``, or all); the types removed, sorted."""
    where = [r.c.from_id == from_id, r.c.to_id == to_id, *([r.c.type == rel_type] if rel_type else [])]
    removed = sorted({row[0] for row in conn.execute(delete(r).where(*where).returning(r.c.type))})
    return removed


def touch(conn: Connection, ids: Iterable[str], at: datetime) -> None:
    conn.execute(
        update(m).where(m.c.id.in_(list(ids)))
        .values(access_count=m.c.access_count + 1, last_accessed_at=at)
    )


def history(conn: Connection, memory_id: str) -> list[RowMapping]:
    return list(conn.execute(select(h).where(h.c.memory_id == memory_id).order_by(h.c.seq)).mappings())


_SUPERSEDED = select(m.c.id).where(m.c.superseded_by == bindparam("id")).limit(1)
_SUCCESSOR = select(m.c.superseded_by).where(m.c.id == bindparam("id"))


def version_chain(conn: Connection, memory_id: str) -> list[str]:
    """The supersession chain through ``memory_id``, oldest first."""
    chain = [memory_id]
    # Back (which one did the oldest so far supersede?), then forward; a cycle stops either walk.
    while (prev := conn.execute(_SUPERSEDED, {"id": chain[0]}).scalar()) is not None and prev not in chain:
        chain.insert(0, prev)
    while (nxt := conn.execute(_SUCCESSOR, {"id": chain[-1]}).scalar()) is not None and nxt not in chain:
        chain.append(nxt)
    return chain


def versions_at(conn: Connection, memory_id: str, flt: MemoryFilter, now: datetime) -> list[str]:
    """The versions of ``memory_id``'s chain (oldest first) that ``flt``'s times admit: all of them without
    ``as_of``/``valid_at``; else those recorded by ``as_of`` or, with ``valid_at``, those holding then."""
    chain = version_chain(conn, memory_id)
    if flt.as_of is None and flt.valid_at is None:
        return chain
    # Archived versions are versions too (memory_history shows them; archive_reason says why they are hidden).
    shown = flt.model_copy(update={"include_archived": True})
    admitted = visible_ids(conn, chain, time_clause(shown, now) if flt.valid_at is not None
                           else m.c.recorded_at <= flt.as_of)
    return [v for v in chain if v in admitted]


def edges_of(conn: Connection, ids: Sequence[str]) -> list[RowMapping]:
    query = select(r.c.from_id, r.c.to_id, r.c.type).where(or_(r.c.from_id.in_(ids), r.c.to_id.in_(ids)))
    return list(conn.execute(query.order_by(r.c.seq)).mappings())




def count_at_most(conn: Connection, where: Any, cap: int) -> int:
    """How many memories satisfy ``where``, counted up to ``cap + 1`` (a bounded cost however many do)."""
    admitted = select(m.c.seq).where(where).limit(cap + 1).subquery()
    return int(conn.execute(select(func.count()).select_from(admitted)).scalar_one())


#: The sets of filter fields an index of memories holds, so that counting the rows with those values reads that
#: index alone: (type, agent_id, user_id) and its leading parts, and conversation_id.
_COUNTED_IN_AN_INDEX = (frozenset({"type"}), frozenset({"type", "agent_id"}),
                        frozenset({"type", "agent_id", "user_id"}), frozenset({"conversation_id"}))
#: Filters that leave out the owner index's first column: counted type by type (the store's few types).
_COUNTED_PER_TYPE = (frozenset({"agent_id"}), frozenset({"agent_id", "user_id"}))


def stored_types() -> Any:
    """A subquery of every type the store holds, each found by one step down the owner index (a loose index
    scan: as many index seeks as there are types, however many memories)."""
    kinds = select(func.min(m.c.type).label("kind")).cte("kinds", recursive=True)
    after = select(func.min(m.c.type)).where(m.c.type > kinds.c.kind).scalar_subquery()
    kinds = kinds.union_all(select(after).where(kinds.c.kind.is_not(None)))
    return select(kinds.c.kind).where(kinds.c.kind.is_not(None))


def holds_more_than(conn: Connection, flt: MemoryFilter, cap: int) -> bool | None:
    """Whether more than ``cap`` memories (current or not) have ``flt``'s field values, counted in an index;
    None when no index holds just those fields (the count would read the table)."""
    fields = frozenset(name for name in FIELDS if getattr(flt, name) is not None)
    if fields in _COUNTED_IN_AN_INDEX:
        return count_at_most(conn, and_(*field_clauses(flt)), cap) > cap
    if fields in _COUNTED_PER_TYPE:
        return count_at_most(conn, and_(m.c.type.in_(stored_types()), *field_clauses(flt)), cap) > cap
    return None


def visible_ids(conn: Connection, ids: Sequence[str], where: Any) -> set[str]:
    """Those of ``ids`` whose rows satisfy ``where``."""
    out: set[str] = set()
    dialect = dialect_for(conn)
    for chunk in chunks(ids):
        out.update(row[0] for row in conn.execute(dialect.by_ids(select(m.c.id).where(where), m.c.id, chunk)))
    return out


#: What similarity supersession decides on (no content: a stored vector needs its owner and times only), and
#: whether the memory has a vector of the model already.
_DECISION_ROWS = select(
    m.c.id, m.c.type, m.c.agent_id, m.c.user_id, m.c.content_hash, m.c.valid_from, m.c.recorded_at,
    m.c.retired_at, m.c.archived_at,
    select(e.c.seq).where(e.c.memory_id == m.c.id, e.c.model == bindparam("model")).exists().label("has_vector"),
).where(m.c.id.in_(bindparam("ids", expanding=True)))


def decision_rows(conn: Connection, ids: Sequence[str], model: str) -> dict[str, RowMapping]:
    """Existing memories among ``ids`` with the columns supersession needs and ``has_vector`` (of ``model``),
    keyed by id."""
    out: dict[str, RowMapping] = {}
    for chunk in chunks(ids):
        out.update((row["id"], row) for row in conn.execute(_DECISION_ROWS, {"ids": chunk, "model": model}).mappings())
    return out


def same_owner_clause(row: RowMapping) -> Any:
    """Current, unarchived memories of the same type, agent and user as ``row`` (supersession candidates)."""
    return and_(owner_clause(row["type"], row["agent_id"], row["user_id"]), m.c.id != row["id"])


def owner_clause(memory_type: str, agent_id: str | None, user_id: str | None) -> Any:
    """Current, unarchived memories of one owner group: this type, agent and user (None matches NULL). An archived
    memory is out of sight until restored: nothing supersedes it meanwhile."""
    return and_(m.c.type == memory_type, _same(m.c.agent_id, agent_id), _same(m.c.user_id, user_id),
                m.c.retired_at.is_(None), m.c.archived_at.is_(None))
