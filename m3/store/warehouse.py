"""The warehouse: a PostgreSQL database that is the hub of warehouse sync (docs/sync.md).

It keeps the latest version of every synced row of every node (``m3sync_rows``: table, key, hybrid-logical-clock
value, origin node, tombstone flag, the row's columns as JSON), numbered in commit order by ``wseq``, which is what
nodes pull by. Pushes take one advisory lock, so ``wseq`` values are committed in the order they are given and a
puller that read up to some ``wseq`` never finds an older one appearing later. Per node it records how far the
node's outbox was applied (``m3sync_nodes``): a batch and that mark commit together, so a push repeated after a
crash applies nothing twice. Concurrent changes are resolved here, once, by one rule (:func:`resolve`), and the
losing version is kept in ``m3sync_conflicts`` (and, for a memory, in its history).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Engine,
    Index,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    func,
    select,
    text,
    tuple_,
)
from sqlalchemy import (
    Sequence as SqlSequence,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.exc import DBAPIError

from m3.errors import SyncNotConfigured, WarehouseUnavailable
from m3.store import schema
from m3.store.sync_tables import BY_NAME, SyncTable

meta = MetaData()
wseq = SqlSequence("m3sync_wseq", metadata=meta)
rows = Table(
    "m3sync_rows", meta,
    Column("tbl", String(40), primary_key=True),
    Column("key", String(300), primary_key=True),
    Column("hlc", BigInteger, nullable=False),
    Column("origin", String(64), nullable=False),
    Column("deleted", Boolean, nullable=False),
    Column("data", JSONB),
    Column("wseq", BigInteger, nullable=False),
    Index("ix_m3sync_rows_wseq", "wseq", unique=True),
)
nodes = Table(
    "m3sync_nodes", meta,
    Column("node", String(64), primary_key=True),
    Column("pushed_upto", BigInteger, nullable=False),
    Column("ahead", JSONB, nullable=False),
    Column("pushed_at", DateTime(timezone=True)),
    Column("pulled_at", DateTime(timezone=True)),
)
conflicts = Table(
    "m3sync_conflicts", meta,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    *schema.conflict_log_columns(JSONB(), DateTime(timezone=True)),
)
meta_table = Table(
    "m3sync_meta", meta,
    Column("name", String(32), primary_key=True),
    Column("value", Text, nullable=False),
)
#: One lock serialises pushes (and schema creation): wseq values then commit in the order they are drawn.
_LOCK = 0x6D3373796E63  # "m3sync"
#: The origin named on rows the warehouse writes itself (a memory's history line about a conflict).
WAREHOUSE = "warehouse"


@dataclass
class Pushed:
    """What one push batch did at the warehouse."""

    applied: int = 0
    skipped: int = 0
    conflicts: int = 0
    details: list[dict[str, Any]] = field(default_factory=list)


class Warehouse:
    """A connection pool to the warehouse; every method is one transaction."""

    def __init__(self, url: str):
        if not url:
            raise SyncNotConfigured("no warehouse is configured (sync.warehouse_url is empty)")
        if not url.startswith(("postgresql", "postgres")):
            raise SyncNotConfigured(f"the warehouse must be a PostgreSQL database, not {url.split(':', 1)[0]!r}")
        if url.startswith("postgresql://") or url.startswith("postgres://"):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        self._engine: Engine = create_engine(url, pool_pre_ping=True, pool_size=1, max_overflow=1)
        self._ready = False

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _tx(self, *, lock: bool = False) -> Iterator[Connection]:
        try:
            with self._engine.begin() as conn:
                if lock:
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK})
                if not self._ready:
                    _ensure(conn)
                yield conn
            self._ready = True
        except DBAPIError as exc:
            # Whatever the database said (gone, restarting, a failed statement), the transaction rolled back whole.
            first = (str(exc.orig).strip().splitlines() or [type(exc.orig).__name__])[0]
            raise WarehouseUnavailable(f"the warehouse failed: {first}") from None

    def identity(self) -> str:
        """The warehouse's own id, made when its tables were: a node that finds another id than the one it synced
        with is talking to a new (or emptied) warehouse and starts over (docs/sync.md)."""
        with self._tx() as conn:
            return str(conn.execute(select(meta_table.c.value).where(meta_table.c.name == "id")).scalar_one())

    def node(self, node: str) -> tuple[int, list[int]]:
        """How far ``node``'s outbox was applied, and the entries past that applied early."""
        with self._tx() as conn:
            found = conn.execute(select(nodes.c.pushed_upto, nodes.c.ahead).where(nodes.c.node == node)).first()
        return (int(found.pushed_upto), list(found.ahead)) if found is not None else (0, [])

    def push(self, node: str, versions: Sequence[Mapping[str, Any]], *, upto: int) -> Pushed:
        """Apply a node's outbox batch (entries up to ``upto`` plus parents sent early) in one transaction."""
        done = Pushed()
        now = datetime.now(UTC)
        with self._tx(lock=True) as conn:
            mark = conn.execute(select(nodes.c.pushed_upto, nodes.c.ahead).where(nodes.c.node == node)
                                .with_for_update()).first()
            pushed_upto, ahead = (int(mark.pushed_upto), set(mark.ahead)) if mark is not None else (0, set())
            fresh = [v for v in versions if v["seq"] > pushed_upto and v["seq"] not in ahead]
            done.skipped = len(versions) - len(fresh)
            current = _current(conn, fresh)
            pending: dict[tuple[str, str], dict[str, Any]] = {}
            for version in fresh:
                _push_one(conn, version, current, pending, done, now)
            _write_all(conn, pending)
            new_upto = max(pushed_upto, upto)
            new_ahead = sorted(s for s in ahead | {v["seq"] for v in versions if v["seq"] > upto} if s > new_upto)
            stmt = insert(nodes).values(node=node, pushed_upto=new_upto, ahead=new_ahead, pushed_at=now)
            conn.execute(stmt.on_conflict_do_update(index_elements=[nodes.c.node], set_={
                "pushed_upto": new_upto, "ahead": new_ahead, "pushed_at": now}))
        return done

    def pull(self, after: int, limit: int, *, node: str) -> tuple[list[dict[str, Any]], int]:
        """The next ``limit`` row versions committed after position ``after``, in commit order, leaving out those
        ``node`` pushed itself (it holds them); and the position to pull from next time.

        Positions commit in the order they are drawn (pushes hold one lock), so every version at or below the
        highest committed position is visible now: when fewer than ``limit`` come back, the next pull may start
        from that highest position."""
        with self._tx() as conn:
            top = int(conn.execute(select(func.coalesce(func.max(rows.c.wseq), 0))).scalar_one())
            found = [dict(r) for r in conn.execute(
                select(rows).where(rows.c.wseq > after, rows.c.wseq <= top, rows.c.origin != node)
                .order_by(rows.c.wseq).limit(limit)).mappings()]
        return found, (int(found[-1]["wseq"]) if len(found) == limit else max(top, after))

    def fetch(self, tbl: str, keys: Sequence[str]) -> list[dict[str, Any]]:
        with self._tx() as conn:
            found = conn.execute(select(rows).where(rows.c.tbl == tbl, rows.c.key.in_(list(keys))))
            return [dict(r) for r in found.mappings()]

    def pulled(self, node: str) -> None:
        now = datetime.now(UTC)
        with self._tx() as conn:
            stmt = insert(nodes).values(node=node, pushed_upto=0, ahead=[], pulled_at=now)
            conn.execute(stmt.on_conflict_do_update(index_elements=[nodes.c.node], set_={"pulled_at": now}))

    def conflicts_after(self, after: int, limit: int) -> list[dict[str, Any]]:
        with self._tx() as conn:
            found = conn.execute(select(conflicts).where(conflicts.c.id > after).order_by(conflicts.c.id).limit(limit))
            return [dict(r) for r in found.mappings()]

    def summary(self) -> dict[str, Any]:
        with self._tx() as conn:
            live = conn.execute(select(func.count()).select_from(rows).where(~rows.c.deleted)).scalar_one()
            dead = conn.execute(select(func.count()).select_from(rows).where(rows.c.deleted)).scalar_one()
            top = conn.execute(select(func.max(rows.c.wseq))).scalar_one()
            known = conn.execute(select(func.count()).select_from(nodes)).scalar_one()
        return {"rows": int(live), "tombstones": int(dead), "wseq": int(top or 0), "nodes": int(known)}

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        """Every live row per table, decoded (tests and the benchmark compare it with the nodes' tables)."""
        out: dict[str, list[dict[str, Any]]] = {}
        with self._tx() as conn:
            for r in conn.execute(select(rows.c.tbl, rows.c.data).where(~rows.c.deleted)):
                out.setdefault(r.tbl, []).append(BY_NAME[r.tbl].decode(r.data))
        return out


def _ensure(conn: Connection) -> None:
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK})
    meta.create_all(conn, checkfirst=True)
    conn.execute(insert(meta_table).values(name="id", value=uuid.uuid4().hex).on_conflict_do_nothing())


def _current(conn: Connection, versions: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    keys = sorted({(v["tbl"], v["key"]) for v in versions})
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for start in range(0, len(keys), 500):
        part = keys[start:start + 500]
        for r in conn.execute(select(rows).where(tuple_(rows.c.tbl, rows.c.key).in_(part))).mappings():
            found[(r["tbl"], r["key"])] = dict(r)
    return found


Pending = dict[tuple[str, str], dict[str, Any]]


def _push_one(conn: Connection, v: Mapping[str, Any], current: Pending, pending: Pending, done: Pushed,
              now: datetime) -> None:
    spec = BY_NAME[v["tbl"]]
    where = (v["tbl"], v["key"])
    have = current.get(where)
    outcome = resolve(spec, v, have)
    if outcome.loser is not None:
        _log_conflict(conn, spec, v["key"], outcome, now, done, pending)
    if outcome.write is not None:
        current[where] = pending[where] = _row(spec.name, v["key"], outcome.write)
        done.applied += 1
    elif outcome.bump and have is not None:
        # The pusher's version lost: the winner gets a new position so every node (the pusher too) pulls it again.
        current[where] = pending[where] = _row(spec.name, v["key"], have)
    else:
        done.skipped += 1


@dataclass
class Outcome:
    write: dict[str, Any] | None = None
    loser: Mapping[str, Any] | None = None
    winner: Mapping[str, Any] | None = None
    bump: bool = False


def _version(v: Mapping[str, Any]) -> tuple[int, str]:
    return int(v["hlc"]), str(v["origin"])


def resolve(spec: SyncTable, v: Mapping[str, Any], have: Mapping[str, Any] | None) -> Outcome:
    """What the warehouse does with version ``v`` of a row it holds as ``have`` (docs/sync.md):

    * nothing held, or ``v`` was based on what is held: ``v`` is written (a fast-forward);
    * the same version again: nothing;
    * otherwise both changed the row since they last agreed: a tombstone of a table whose keys are never reused
      wins (erased content never comes back); else the higher (clock value, node id) wins, a memory keeping the
      earliest retirement of either side. The other version is the loser, logged, never dropped silently.
    """
    mine = {k: v[k] for k in ("hlc", "origin", "deleted", "data")}
    if have is None:
        return Outcome(write=mine)
    if _version(have) == _version(v):
        return Outcome()
    if (v.get("base_hlc"), v.get("base_origin")) == _version(have):
        return Outcome(write=mine)
    if have["deleted"] and v["deleted"]:
        return Outcome()
    if spec.final_delete and (have["deleted"] or v["deleted"]):
        # The losing version is logged without its columns: a deletion (an erasure) must not survive in the log.
        if have["deleted"]:
            return Outcome(loser={**v, "data": None}, winner=have, bump=True)
        return Outcome(write=mine, loser={**have, "data": None}, winner=v)
    if not have["deleted"] and not v["deleted"] and have["data"] == v["data"]:
        return Outcome(write=mine) if _version(v) > _version(have) else Outcome()
    winner, loser = (v, have) if _version(v) > _version(have) else (have, v)
    merged = _merged(spec, winner, loser)
    if merged is not None:
        top = max(int(v["hlc"]), int(have["hlc"])) + 1
        # Named as the warehouse's own version: a new one for both sides (a puller leaves out only its own).
        return Outcome(write={"hlc": top, "origin": WAREHOUSE, "deleted": False, "data": merged},
                       loser=loser, winner=winner)
    if winner is v:
        return Outcome(write=mine, loser=have, winner=v)
    return Outcome(loser=v, winner=have, bump=True)


_RETIREMENT = ("retired_at", "retire_reason", "superseded_by")


def _merged(spec: SyncTable, winner: Mapping[str, Any], loser: Mapping[str, Any]) -> dict[str, Any] | None:
    """For a memory: the winner with the loser's retirement when that is earlier (a fact superseded on one machine
    stays superseded); None when nothing of the loser is kept."""
    if spec.name != schema.memories.name or winner["deleted"] or loser["deleted"]:
        return None
    won, lost = winner["data"], loser["data"]
    if lost.get("retired_at") is None:
        return None
    if won.get("retired_at") is not None and won["retired_at"] <= lost["retired_at"]:
        return None
    merged = dict(won)
    merged.update({k: lost.get(k) for k in _RETIREMENT})
    return merged


def _row(tbl: str, key: str, version: Mapping[str, Any]) -> dict[str, Any]:
    return {"tbl": tbl, "key": key, "hlc": int(version["hlc"]), "origin": version["origin"],
            "deleted": bool(version["deleted"]), "data": None if version["deleted"] else version["data"]}


def _write_all(conn: Connection, pending: Pending) -> None:
    """Upsert the batch's rows in one statement per chunk, each drawing a new position (wseq) in order."""
    stmt = insert(rows).values(wseq=wseq.next_value())
    stmt = stmt.on_conflict_do_update(index_elements=[rows.c.tbl, rows.c.key], set_={
        c: stmt.excluded[c] for c in ("hlc", "origin", "deleted", "data", "wseq")})
    items = list(pending.values())
    for start in range(0, len(items), 1000):
        conn.execute(stmt, items[start:start + 1000])


def _log_conflict(conn: Connection, spec: SyncTable, key: str, outcome: Outcome, now: datetime,
                  done: Pushed, pending: Pending) -> None:
    loser, winner = outcome.loser, outcome.winner
    assert loser is not None and winner is not None
    conn.execute(conflicts.insert().values(
        tbl=spec.name, key=key, winner_hlc=int(winner["hlc"]), winner_origin=winner["origin"],
        loser_hlc=int(loser["hlc"]), loser_origin=loser["origin"], loser_deleted=bool(loser["deleted"]),
        loser_data=loser["data"], at=now))
    done.conflicts += 1
    done.details.append({"tbl": spec.name, "key": key})
    live = outcome.write if outcome.write is not None else winner
    history = _HISTORY.get(spec.name)
    if history is not None and not live["deleted"]:
        _history_line(pending, history, key, loser, winner, now)


#: Where a row's history lives: a conflict over a memory or a task is also told there.
_HISTORY = {schema.memories.name: (schema.memory_history.name, "memory_id"),
            schema.tasks.name: (schema.task_events.name, "task_id")}


def _history_line(pending: Pending, history: tuple[str, str], row_id: str, loser: Mapping[str, Any],
                  winner: Mapping[str, Any], now: datetime) -> None:
    """A ``sync_conflict`` event in the row's history, holding the losing version (a row every node pulls)."""
    table, column = history
    spec = BY_NAME[table]
    row = {column: row_id, "event": "sync_conflict", "actor": "sync", "at": now,
           "details": {"winner": {"hlc": int(winner["hlc"]), "origin": winner["origin"]},
                       "loser": {"hlc": int(loser["hlc"]), "origin": loser["origin"], "deleted": bool(loser["deleted"]),
                                 "data": loser["data"]}}}
    data = spec.encode(row)
    key = spec.key_of(row)
    pending[(spec.name, key)] = _row(spec.name, key, {"hlc": int(winner["hlc"]), "origin": WAREHOUSE,
                                                      "deleted": False, "data": json.loads(json.dumps(data))})
