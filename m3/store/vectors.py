"""Embedding vectors: storing them, loading them incrementally, counting them.

Every vector carries its model id and dimension. Replacing a vector deletes
and re-inserts it so that its ``seq`` grows and incremental loaders
(``load_after``) see the change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, bindparam, delete, func, insert, select

from m3.store.dialect import dialect_for
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e

Matrix = npt.NDArray[np.float32]


_DELETE = delete(e).where(e.c.model == bindparam("model"), e.c.memory_id.in_(bindparam("ids", expanding=True)))
_INSERT = insert(e)


def store(conn: Connection, model: str, dim: int, ids: Sequence[str], vectors: Matrix, at: datetime,
          existing: Mapping[str, bool]) -> list[str]:
    """Store one vector per id for ``model``; return the ids that still exist (others were deleted meanwhile).

    ``existing``: the ids among ``ids`` that exist, as the caller read them in this transaction, each mapped to
    whether it has a vector of ``model`` already (to be replaced).
    """
    keep = [i for i, memory_id in enumerate(ids) if memory_id in existing]
    if not keep:
        return []
    kept_ids = [ids[i] for i in keep]
    replaced = [memory_id for memory_id in kept_ids if existing[memory_id]]
    if replaced:
        conn.execute(_DELETE, {"model": model, "ids": replaced})
    conn.execute(_INSERT, [
        {"memory_id": ids[i], "model": model, "dim": dim, "vector": vectors[i], "created_at": at} for i in keep
    ])
    return kept_ids


def _matrix(vectors: Sequence[Matrix]) -> Matrix:
    """The vectors as the rows of one float32 matrix; (0, 0) when there are none."""
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    return np.vstack(vectors).astype(np.float32, copy=False)


#: Run before every search on SQLite (the in-memory leg's refresh): built once, given its values when it runs.
_AFTER = (select(e.c.seq, e.c.memory_id, e.c.vector)
          .where(e.c.model == bindparam("model"), e.c.seq > bindparam("after")).order_by(e.c.seq)
          .limit(bindparam("limit")))


def load_after(conn: Connection, model: str, after_seq: int, limit: int = 20_000) -> tuple[int, list[str], Matrix]:
    """Vectors of ``model`` with seq > ``after_seq``, oldest first: (last seq, ids, matrix)."""
    rows = conn.execute(_AFTER, {"model": model, "after": after_seq, "limit": limit}).all()
    last = int(rows[-1][0]) if rows else after_seq
    return last, [row[1] for row in rows], _matrix([row[2] for row in rows])


def vectors_for(conn: Connection, model: str, where: Any, limit: int = 50_000) -> tuple[list[str], Matrix]:
    """Vectors of ``model`` for memories matching ``where`` (a clause on memories)."""
    rows = conn.execute(select(e.c.memory_id, e.c.vector).join(m, m.c.id == e.c.memory_id)
                        .where(e.c.model == model, where).limit(limit)).all()
    return [row[0] for row in rows], _matrix([row[1] for row in rows])


def vectors_of(conn: Connection, model: str, ids: Sequence[str]) -> dict[str, Matrix]:
    """The stored vectors of ``model`` of the memories ``ids`` (those that have one), found by memory id.

    Through the (memory_id, model) key, never a join with memories: right after a bulk write PostgreSQL's
    statistics still count a model's vectors in tens, and the join then walked every vector of the model
    (22 ms for 100 ids at 1k memories, against 0.6 ms by key; docs/benchmarks.md)."""
    out: dict[str, Matrix] = {}
    dialect = dialect_for(conn)
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        out.update((row[0], row[1]) for row in conn.execute(
            select(e.c.memory_id, e.c.vector).where(dialect.ids_in(e.c.memory_id, chunk), e.c.model == model)))
    return out


#: Ids per lookup, well below either database's bound-parameter limit.
_CHUNK = 500


def counts_by_model(conn: Connection) -> dict[str, int]:
    rows = conn.execute(select(e.c.model, func.count()).group_by(e.c.model)).all()
    return {str(model): int(n) for model, n in rows}


def missing(conn: Connection, model: str, after_seq: int, limit: int) -> list[tuple[int, str, str, bool]]:
    """Current memories after ``after_seq`` without a vector of ``model``, by seq:
    (seq, id, text, whether it has a vector of another model)."""
    has_any = select(e.c.memory_id).where(e.c.memory_id == m.c.id).exists()
    rows = conn.execute(
        select(m.c.seq, m.c.id, m.c.title, m.c.content, has_any)
        .where(m.c.seq > after_seq, m.c.retired_at.is_(None), ~_has_vector(model))
        .order_by(m.c.seq).limit(limit)
    ).all()
    return [(int(row[0]), row[1], embed_text(row[2], row[3]), bool(row[4])) for row in rows]


_other = m.alias("other")
# ``model || ''``, not ``model``: otherwise SQLite (no statistics) drives the join from the
# (model, seq) index, reading every vector of the model per call (0.85 s at 20k memories, not 1 ms).
# Built once: a new alias per call cost the Embedder more than the query (its column collection).
_REUSABLE = (
    select(m.c.id, e.c.vector)
    .join(_other, (_other.c.content_hash == m.c.content_hash) & (_other.c.id != m.c.id)
          & _other.c.title.is_not_distinct_from(m.c.title))
    .join(e, (e.c.memory_id == _other.c.id) & (e.c.model.concat("") == bindparam("model")))
    .where(m.c.id.in_(bindparam("ids", expanding=True)))
)


def reusable(conn: Connection, model: str, ids: Sequence[str]) -> dict[str, Matrix]:
    """For memories among ``ids``: a stored vector of ``model`` of another memory with the same content and
    title (so the same text to embed), when one exists."""
    if not ids:
        return {}
    rows = conn.execute(_REUSABLE, {"model": model, "ids": list(ids)}).all()
    return {row[0]: np.asarray(row[1], dtype=np.float32) for row in rows}


def count_current(conn: Connection) -> int:
    """Current memories: all of them less the retired ones, each counted in an index (not a read of every row)."""
    return _count(conn, select(func.count()).select_from(m)) - _count(
        conn, select(func.count()).select_from(m).where(m.c.retired_at.is_not(None)))


def count_missing(conn: Connection, model: str) -> int:
    """Current memories without a vector of ``model``: the current ones less those with one (at most one each),
    counted in indexes rather than by a probe per memory (a quarter of a second at 100k memories on SQLite).
    The vectors of retired memories are found from the retired ones (a partial index): a join would be driven
    from every vector of the model."""
    of_model = _count(conn, select(func.count()).select_from(e).where(e.c.model == model))
    of_retired = _count(conn, select(func.count()).select_from(m).where(m.c.retired_at.is_not(None),
                                                                         _has_vector(model)))
    return count_current(conn) - (of_model - of_retired)


def _count(conn: Connection, query: Any) -> int:
    return int(conn.execute(query).scalar_one())


def _has_vector(model: str) -> Any:
    """Whether the memory row has a vector of ``model`` (a correlated EXISTS)."""
    return select(e.c.memory_id).where(e.c.model == model, e.c.memory_id == m.c.id).exists()


def embed_text(title: str | None, content: str) -> str:
    """The text whose vector represents a memory: its title (if any) and content."""
    return f"{title}\n{content}" if title else content
