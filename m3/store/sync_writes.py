"""A node's side of warehouse sync, run by the Writer in its transactions (docs/sync.md).

* :func:`stage` turns the trigger notes of ``sync_changes`` into stamped versions in ``sync_outbox``: each gets
  a hybrid-logical-clock value and remembers the version it was based on (what this node last agreed with the
  warehouse), which is how the warehouse tells a fast-forward from a concurrent change.
* :func:`confirm` records what the warehouse committed (``sync_rows``) and empties those outbox entries.
* :func:`apply` writes a pulled batch and moves the pull watermark in the same transaction, so a batch is applied
  exactly once whatever stops the sync. Rows with a local change still to push are left alone: the warehouse
  resolves that conflict at the next push, by the same rule for every node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from m3.protocols.messages.governance import Subject
from m3.store import schema, sync_state
from m3.store.dialect import dialect_for
from m3.store.embedding_models import active
from m3.store.subject_writes import forget
from m3.store.subjects import subject_hash
from m3.store.sync_tables import BY_NAME, SyncTable, order
from m3.store.sync_tables import table as spec_of
from m3.store.vectors import embed_text

_ROWS, _CHANGES, _OUTBOX = schema.sync_rows, schema.sync_changes, schema.sync_outbox
#: Rows read per statement.
CHUNK = 400


# -- staging ---------------------------------------------------------------------------------------------------

def stage(conn: Connection, *, tables: Sequence[str] | None = None) -> int:
    """Stamp the noted changes into the outbox; how many versions. With ``tables``, only the notes of those
    tables (the others wait)."""
    which = _CHANGES.c.tbl.in_(list(tables)) if tables is not None else _CHANGES.c.seq.is_not(None)
    top = conn.execute(select(func.max(_CHANGES.c.seq)).where(which)).scalar_one_or_none()
    if top is None:
        return 0
    notes = select(_CHANGES.c.tbl, _CHANGES.c.row_seq, func.max(_CHANGES.c.at_ms).label("at_ms")) \
        .where(_CHANGES.c.seq <= top, which).group_by(_CHANGES.c.tbl, _CHANGES.c.row_seq)
    by_table: dict[str, dict[int, int]] = {}
    for tbl, row_seq, at_ms in conn.execute(notes):
        by_table.setdefault(tbl, {})[int(row_seq)] = int(at_ms)
    clock = sync_state.HybridClock(conn)
    staged = 0
    for tbl, changed in by_table.items():
        staged += _stage_table(conn, spec_of(tbl), changed, clock)
    conn.execute(delete(_CHANGES).where(_CHANGES.c.seq <= top, which))
    clock.save()
    return staged


def _stage_table(conn: Connection, spec: SyncTable, changed: dict[int, int], clock: sync_state.HybridClock) -> int:
    seqs = sorted(changed)
    current: dict[int, str] = {}
    for part in _chunks(seqs):
        for row in conn.execute(select(spec.table).where(spec.table.c.seq.in_(part))).mappings():
            current[int(row["seq"])] = spec.key_of(row)
    known: dict[int, set[str]] = {}
    for part in _chunks(seqs):
        for source in (_ROWS, _OUTBOX):
            for row_seq, key in conn.execute(select(source.c.row_seq, source.c.key).where(
                    source.c.tbl == spec.name, source.c.row_seq.in_(part))):
                known.setdefault(int(row_seq), set()).add(key)
    stamps: dict[str, tuple[int | None, int]] = {}
    for row_seq in seqs:
        at = changed[row_seq]
        live = current.get(row_seq)
        if live is not None:
            stamps[live] = (row_seq, clock.stamp(at))
        for gone in known.get(row_seq, set()) - {live}:
            # The row is deleted, or (a history row rewritten, a reused seq) now has another key.
            stamps.setdefault(gone, (None, clock.stamp(at)))
    _stamp_all(conn, spec.name, stamps)
    return len(stamps)


def _stamp_all(conn: Connection, tbl: str, stamps: Mapping[str, tuple[int | None, int]]) -> None:
    """Queue a version (row seq, clock value) of each key; an unsent version of a key is replaced, its base kept
    (what this node last agreed with the warehouse)."""
    keys = list(stamps)
    base: dict[str, tuple[Any, Any]] = {}
    waiting: list[str] = []
    for part in _chunks(keys):
        for key, b_hlc, b_origin in conn.execute(select(_OUTBOX.c.key, _OUTBOX.c.base_hlc, _OUTBOX.c.base_origin)
                                                 .where(_OUTBOX.c.tbl == tbl, _OUTBOX.c.key.in_(part))):
            base[key] = (b_hlc, b_origin)
            waiting.append(key)
        for key, hlc, origin in conn.execute(select(_ROWS.c.key, _ROWS.c.hlc, _ROWS.c.origin)
                                             .where(_ROWS.c.tbl == tbl, _ROWS.c.key.in_(part))):
            base.setdefault(key, (hlc, origin))
    for part in _chunks(waiting):
        conn.execute(delete(_OUTBOX).where(_OUTBOX.c.tbl == tbl, _OUTBOX.c.key.in_(part)))
    # New outbox seqs: each entry goes to the end of the queue, past any push already acknowledged.
    rows = [{"tbl": tbl, "key": key, "row_seq": row_seq, "hlc": hlc, "base_hlc": base.get(key, (None, None))[0],
             "base_origin": base.get(key, (None, None))[1]} for key, (row_seq, hlc) in stamps.items()]
    for part in _chunks(rows):
        conn.execute(insert(_OUTBOX), part)


# -- confirming a push -----------------------------------------------------------------------------------------

def confirm(conn: Connection, node: str, upto: int, ahead: Sequence[int]) -> int:
    """The warehouse committed this node's outbox up to ``upto`` (and the entries ``ahead``, sent early as parents
    of others): record those versions as agreed and drop them from the outbox; how many."""
    cond = _OUTBOX.c.seq <= upto
    if ahead:
        cond = cond | _OUTBOX.c.seq.in_(list(ahead))
    sent = conn.execute(select(_OUTBOX).where(cond)).mappings().all()
    held: set[tuple[str, int]] = set()
    by_table: dict[str, list[int]] = {}
    for entry in sent:
        if entry["row_seq"] is not None:
            by_table.setdefault(entry["tbl"], []).append(int(entry["row_seq"]))
    for tbl, seqs in by_table.items():
        t = BY_NAME[tbl].table
        for part in _chunks(seqs):
            held |= {(tbl, int(r)) for (r,) in conn.execute(select(t.c.seq).where(t.c.seq.in_(part)))}
    agreed = []
    for entry in sent:
        row_seq = entry["row_seq"] if (entry["tbl"], entry["row_seq"]) in held else None
        agreed.append({"tbl": entry["tbl"], "key": entry["key"], "row_seq": row_seq, "hlc": entry["hlc"],
                       "origin": node, "deleted": row_seq is None})
    upsert_agreed(conn, agreed)
    conn.execute(delete(_OUTBOX).where(cond))
    return len(sent)


def upsert_agreed(conn: Connection, items: Sequence[Mapping[str, Any]]) -> None:
    """Record versions this node and the warehouse agree on (``sync_rows``), one statement per chunk."""
    stmt = sqlite_insert(_ROWS)
    stmt = stmt.on_conflict_do_update(index_elements=[_ROWS.c.tbl, _ROWS.c.key], set_={
        c: stmt.excluded[c] for c in ("row_seq", "hlc", "origin", "deleted")})
    for part in _chunks(list(items)):
        conn.execute(stmt, part)


# -- applying a pulled batch -----------------------------------------------------------------------------------

@dataclass
class Applied:
    """What applying a pulled batch did."""

    applied: int = 0
    #: Rows left alone: this node changed them too, and the warehouse resolves that at the next push.
    pending: int = 0
    #: Versions this node already held (its own, coming back).
    echoes: int = 0
    #: Rows whose parent row is gone here: deleted (and that deletion pushed back) or the link cleared.
    orphaned: int = 0
    memories: list[str] = field(default_factory=list)
    erased: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    #: Agents a notification arrived for (their waiting calls wake up).
    notified: list[str] = field(default_factory=list)


def apply(conn: Connection, versions: Sequence[Mapping[str, Any]], *, watermark: int | None, now_ms: int) -> Applied:
    """Write ``versions`` (``tbl``, ``key``, ``hlc``, ``origin``, ``deleted``, ``data``) and move the pull
    watermark to ``watermark`` (when given), all in the caller's transaction. Deletions go first (children before
    parents), then the rest (parents before children), so a row arriving with a parent deleted in the same batch
    is an orphan. Changes the writes cause here (a cascade, a cleared link) stay noted and are pushed back."""
    before = conn.execute(select(func.coalesce(func.max(_CHANGES.c.seq), 0))).scalar_one()
    batch = _Batch(conn, versions, now_ms)
    dead = sorted((v for v in versions if v["deleted"]), key=lambda v: -order(v["tbl"]))
    live = sorted((v for v in versions if not v["deleted"]), key=lambda v: order(v["tbl"]))
    for version in [*dead, *live]:
        batch.clock.observe(int(version["hlc"]))
        batch.apply(version)
    batch.flush_agreed()
    for tbl, seqs in batch.touched.items():
        for part in _chunks(sorted(seqs)):
            conn.execute(delete(_CHANGES).where(_CHANGES.c.seq > before, _CHANGES.c.tbl == tbl,
                                                _CHANGES.c.row_seq.in_(part)))
    for tbl, row_seq in batch.renote:
        conn.execute(insert(_CHANGES).values(tbl=tbl, row_seq=row_seq, at_ms=now_ms))
    _erase_again(conn, [v for v in live if v["tbl"] == schema.erasures.name], batch.done)
    if watermark is not None:
        sync_state.put(conn, "pulled", watermark)
    batch.clock.save()
    return batch.done


class _Batch:
    """One pulled batch being applied: what this store agreed, has pending and holds, read once for the batch."""

    def __init__(self, conn: Connection, versions: Sequence[Mapping[str, Any]], now_ms: int):
        self.conn, self.now_ms = conn, now_ms
        self.clock = sync_state.HybridClock(conn)
        self.done = Applied()
        self.touched: dict[str, set[int]] = {}
        self.renote: list[tuple[str, int]] = []
        self.agreed: dict[tuple[str, str], dict[str, Any]] = {}
        self.outboxed: set[tuple[str, str]] = set()
        by_table: dict[str, list[str]] = {}
        for v in versions:
            by_table.setdefault(v["tbl"], []).append(v["key"])
        for tbl, keys in by_table.items():
            for part in _chunks(keys):
                for row in conn.execute(select(_ROWS).where(_ROWS.c.tbl == tbl, _ROWS.c.key.in_(part))).mappings():
                    self.agreed[(tbl, row["key"])] = dict(row)
                self.outboxed |= {(tbl, k) for (k,) in conn.execute(
                    select(_OUTBOX.c.key).where(_OUTBOX.c.tbl == tbl, _OUTBOX.c.key.in_(part)))}
        self.noted = {(t, int(r)) for t, r in conn.execute(select(_CHANGES.c.tbl, _CHANGES.c.row_seq))}
        self.present = _present_parents(conn, versions)
        self.agrees: dict[tuple[str, str], dict[str, Any]] = {}

    def apply(self, v: Mapping[str, Any]) -> None:
        spec, done = BY_NAME[v["tbl"]], self.done
        key, hlc, origin = v["key"], int(v["hlc"]), v["origin"]
        agreed = self.agreed.get((spec.name, key))
        if agreed is not None and (agreed["hlc"], agreed["origin"]) == (hlc, origin):
            done.echoes += 1
            return
        local = _local_row(self.conn, spec, key, agreed)
        if (spec.name, key) in self.outboxed or (local is not None and (spec.name, int(local["seq"])) in self.noted):
            done.pending += 1  # changed here too, not pushed yet: the warehouse decides at the next push
            return
        if v["deleted"]:
            self._remove(spec, local)
            self.agree(spec.name, key, None, hlc, origin, deleted=True)
            done.applied += 1
            return
        data = spec.decode(v["data"])
        cleared = self._orphan_check(spec, data)
        if cleared is None:  # a parent it cannot live without is gone here: gone too, and told back
            self._remove(spec, local)
            self.agree(spec.name, key, None, hlc, origin, deleted=True)
            self.conn.execute(insert(_OUTBOX).values(tbl=spec.name, key=key, row_seq=None,
                                                     hlc=self.clock.stamp(self.now_ms), base_hlc=hlc,
                                                     base_origin=origin))
            done.orphaned += 1
            return
        row_seq = _write_row(self.conn, spec, data, local, done)
        self.touched.setdefault(spec.name, set()).add(row_seq)
        if "id" in data and spec.name in self.present:
            self.present[spec.name].add(data["id"])
        self.agree(spec.name, key, row_seq, hlc, origin, deleted=False)
        if cleared:
            self.renote.append((spec.name, row_seq))
            done.orphaned += 1
        done.applied += 1

    def _remove(self, spec: SyncTable, local: Any) -> None:
        if local is None:
            return
        self.touched.setdefault(spec.name, set()).add(int(local["seq"]))
        if spec.name in self.present and "id" in local:
            self.present[spec.name].discard(local["id"])
        _delete_row(self.conn, spec, local, self.done)

    def _orphan_check(self, spec: SyncTable, data: dict[str, Any]) -> bool | None:
        """Clear links to parents gone here (``set_null``); None when a parent the row needs is gone
        (``cascade``); else whether a link was cleared."""
        cleared = False
        for parent in spec.parents:
            value = data.get(parent.column)
            if value is None or value in self.present.get(parent.table, ()):
                continue
            if parent.on_gone == "set_null":
                data[parent.column] = None
                cleared = True
            else:
                return None
        return cleared

    def agree(self, tbl: str, key: str, row_seq: int | None, hlc: int, origin: str, *, deleted: bool) -> None:
        self.agrees[(tbl, key)] = {"tbl": tbl, "key": key, "row_seq": row_seq, "hlc": hlc, "origin": origin,
                                   "deleted": deleted}

    def flush_agreed(self) -> None:
        """Record every version agreed in this batch."""
        upsert_agreed(self.conn, list(self.agrees.values()))


def _present_parents(conn: Connection, versions: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Per parent table, the ids the batch's rows name that this store holds now."""
    wanted: dict[str, set[str]] = {}
    for v in versions:
        if v["deleted"]:
            continue
        for parent in BY_NAME[v["tbl"]].parents:
            value = (v["data"] or {}).get(parent.column)
            if value is not None:
                wanted.setdefault(parent.table, set()).add(value)
    present: dict[str, set[str]] = {name: set() for name in (p.table for t in BY_NAME.values() for p in t.parents)}
    for tbl, ids in wanted.items():
        t = BY_NAME[tbl].table
        for part in _chunks(sorted(ids)):
            present[tbl] |= {i for (i,) in conn.execute(select(t.c.id).where(t.c.id.in_(part)))}
    return present


def _local_row(conn: Connection, spec: SyncTable, key: str, agreed: Mapping[Any, Any] | None) -> Any:
    t = spec.table
    if spec.kind == "hash":
        if agreed is None or agreed["row_seq"] is None:
            return None
        return conn.execute(select(t).where(t.c.seq == agreed["row_seq"])).mappings().first()
    values = spec.key_values(key)
    return conn.execute(select(t).where(and_(*(t.c[c] == values[c] for c in spec.key_columns)))).mappings().first()


def _write_row(conn: Connection, spec: SyncTable, data: dict[str, Any], local: Any, done: Applied) -> int:
    t = spec.table
    if spec.name == schema.memories.name:
        _note_memory(data, local, done)
    if spec.name == schema.notifications.name and local is None:
        done.notified.append(data["agent_id"])
    if local is not None and spec.name in _VECTOR_TABLES:
        # A new seq, so the Searcher's vector index (refreshed by seq) takes the new vector.
        conn.execute(delete(t).where(t.c.seq == local["seq"]))
        local = None
    if local is not None:
        conn.execute(update(t).where(t.c.seq == local["seq"]).values(**data))
        return int(local["seq"])
    fresh = dict(data)
    for column in spec.local_columns:  # this machine's own counters start afresh
        fresh[column] = _LOCAL_DEFAULTS.get(column)
    if spec.name == schema.agents.name:
        fresh["last_seen_at"] = data.get("registered_at")
    return _new_seq(conn.execute(insert(t).values(**fresh)).inserted_primary_key)


_VECTOR_TABLES = frozenset({schema.memory_embeddings.name, schema.chat_embeddings.name})
_LOCAL_DEFAULTS: dict[str, Any] = {"access_count": 0, "last_accessed_at": None, "offline_at": None}


def _note_memory(data: Mapping[str, Any], local: Any, done: Applied) -> None:
    done.memories.append(data["id"])
    was = local["archived_at"] if local is not None else None
    if data.get("archived_at") is not None and was is None:
        done.archived.append(data["id"])
    elif data.get("archived_at") is None and was is not None:
        done.restored.append(data["id"])


def _delete_row(conn: Connection, spec: SyncTable, local: Any, done: Applied) -> None:
    if spec.name == schema.memories.name:
        done.erased.append(local["id"])
    conn.execute(delete(spec.table).where(spec.table.c.seq == local["seq"]))


def _chunks(items: Sequence[Any] | Iterable[Any]) -> Iterable[list[Any]]:
    items = list(items)
    for start in range(0, len(items), CHUNK):
        yield items[start:start + CHUNK]


def _erase_again(conn: Connection, erasures: Sequence[Mapping[str, Any]], done: Applied) -> None:
    """Another machine erased a subject: erase here whatever this store holds of it, rows made here before the
    erasure arrived included (the deletions are noted, so they reach the warehouse at the next push). The subject
    is known only by its hash, so it is found among the agents and users this store names."""
    wanted = {(v["data"]["kind"], v["data"]["subject_hash"]) for v in erasures}
    if not wanted:
        return
    now = datetime.now(UTC)
    for subject in _subjects(conn):
        if (subject.kind, subject_hash(subject)) in wanted:
            _, _, erased = forget(conn, subject, now=now, actor="sync", dialect=dialect_for(conn))
            done.erased += erased


def _subjects(conn: Connection) -> list[Subject]:
    m, c, a, t = schema.memories, schema.chatlog, schema.agents, schema.tasks
    agents = {x for q in (select(m.c.agent_id), select(c.c.agent_id), select(a.c.id), select(t.c.creator),
                          select(t.c.owner)) for (x,) in conn.execute(q.distinct()) if x}
    users = {x for (x,) in conn.execute(select(m.c.user_id).distinct()) if x}
    return [Subject(kind="agent", id=x) for x in sorted(agents)] + [Subject(kind="user", id=x) for x in sorted(users)]


# -- after a pull, and the logs --------------------------------------------------------------------------------

def unembedded(conn: Connection, ids: Sequence[str]) -> list[tuple[str, str]]:
    """(id, text) of the current memories among ``ids`` without a vector of the active model."""
    model = active(conn)
    m, e = schema.memories, schema.memory_embeddings
    out: list[tuple[str, str]] = []
    for part in _chunks(sorted(set(ids))):
        has = select(e.c.seq).where(e.c.memory_id == m.c.id, e.c.model == model).exists()
        query = select(m.c.id, m.c.title, m.c.content).where(m.c.id.in_(part), m.c.retired_at.is_(None))
        if model is not None:
            query = query.where(~has)
        out += [(r.id, embed_text(r.title, r.content)) for r in conn.execute(query)]
    return out


def record_conflicts(conn: Connection, entries: Sequence[Mapping[str, Any]]) -> int:
    """Copy warehouse conflict log entries (by their warehouse id, once each)."""
    t = schema.sync_conflicts
    known = {w for (w,) in conn.execute(select(t.c.wid).where(t.c.wid.in_([e["id"] for e in entries])))}
    fresh = [{"wid": e["id"], **{c: e[c] for c in schema.CONFLICT_LOG_FIELDS}} for e in entries if e["id"] not in known]
    if fresh:
        conn.execute(insert(t), fresh)
    return len(fresh)


def record_run(conn: Connection, run: Mapping[str, Any]) -> int:
    return _new_seq(conn.execute(insert(schema.sync_runs).values(**run)).inserted_primary_key)


def _new_seq(key: Any) -> int:
    assert key is not None
    return int(key[0])
