"""PostgreSQL's nearest-neighbour queries: pgvector's HNSW index of a model, one query vector or many.

Each model's vectors have a partial HNSW index over ``vector::vector(dim)``
(:func:`m3.store.postgres.ensure_hnsw_index`); a query uses it when its distance expression is that cast
and the model and dimension are literals (docs/postgres.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Float, String, bindparam, cast, literal, select, true, union_all
from sqlalchemy.sql.expression import Executable

from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e
from m3.store.types import VectorType, pg_vector_of

Matrix = npt.NDArray[np.float32]


def nearest(conn: Connection, model: str, dim: int, query: Matrix, where: Any, limit: int, *,
            exact: bool = False) -> list[tuple[str, float, Matrix]]:
    """Up to ``limit`` (memory id, cosine, vector) of ``model`` among memories matching ``where``, best first.

    Uses the model's HNSW index (approximate, strict distance order); with
    ``exact`` the distance expression does not match the index and every
    matching row is compared.
    """
    vec = cast(e.c.vector, pg_vector_of(dim))
    q = bindparam("q", np.asarray(query, dtype=np.float32), type_=VectorType())
    distance = (e.c.vector if exact else vec).op("<=>", return_type=Float())(q).label("distance")
    stmt = (
        select(e.c.memory_id, e.c.vector, distance)
        .join(m, m.c.id == e.c.memory_id)
        .where(e.c.model == literal(model, String(), literal_execute=True), e.c.dim == literal(int(dim),
               literal_execute=True), where)
        .order_by(distance, e.c.memory_id)
        .limit(limit)
    )
    return [(row[0], 1.0 - float(row[2]), row[1]) for row in conn.execute(stmt)]


#: Stored vectors whose neighbours one :func:`nearest_each` statement finds (bounds its bind parameters).
NEAREST_EACH_PAGE = 500


def nearest_each(conn: Connection, model: str, dim: int, groups: Sequence[tuple[Any, Sequence[str]]], limit: int,
                 max_distance: float) -> dict[str, list[tuple[str, float]]]:
    """For each memory id of each group (``where`` clause on memories, ids whose ``model`` vector is stored):
    up to ``limit`` (memory id, cosine) of the memories matching ``where`` other than itself, best first, cut
    to those nearer than ``max_distance``. One statement (per :data:`NEAREST_EACH_PAGE` ids).

    Each id's neighbours are exactly what :func:`nearest` returns for its stored vector (the same HNSW index
    scan, the same order, the same ``limit``), run as one LATERAL join: a branch per group, so that each
    branch's owner condition is a constant the planner estimates well (a correlated ``IS NOT DISTINCT FROM``
    made it scan every memory per vector). A vector stored earlier in the caller's transaction is found.
    """
    flat = [(g, memory_id) for g, (_, ids) in enumerate(groups) for memory_id in ids]
    statements: list[list[tuple[Any, list[str]]]] = []
    for start in range(0, len(flat), NEAREST_EACH_PAGE):
        page: dict[int, list[str]] = {}
        for g, memory_id in flat[start:start + NEAREST_EACH_PAGE]:
            page.setdefault(g, []).append(memory_id)
        statements.append([(groups[g][0], ids) for g, ids in page.items()])
    found: dict[str, list[tuple[float, str]]] = {}
    for pages in statements:
        branches = [_nearest_branch(model, dim, where, ids, limit, max_distance) for where, ids in pages]
        stmt: Executable = branches[0] if len(branches) == 1 else union_all(*branches)
        for query_id, memory_id, distance in conn.execute(stmt):
            found.setdefault(query_id, []).append((float(distance), memory_id))
    # Rows of one statement arrive in no particular order across its ids: each list in nearest()'s order.
    return {query_id: [(memory_id, 1.0 - distance) for distance, memory_id in sorted(hits)]
            for query_id, hits in found.items()}


def _nearest_branch(model: str, dim: int, where: Any, ids: list[str], limit: int, max_distance: float) -> Any:
    """One group's part of :func:`nearest_each`: its stored vectors, each joined to its ``limit`` nearest."""
    q = e.alias("q")
    model_is = literal(model, String(), literal_execute=True)
    dim_is = literal(int(dim), literal_execute=True)
    distance = cast(e.c.vector, pg_vector_of(dim)).op("<=>", return_type=Float())(q.c.vector).label("distance")
    near = (select(e.c.memory_id, distance).join(m, m.c.id == e.c.memory_id)
            .where(e.c.model == model_is, e.c.dim == dim_is, where, e.c.memory_id != q.c.memory_id)
            .order_by(distance, e.c.memory_id).limit(limit).lateral("near"))
    return (select(q.c.memory_id.label("query_id"), near.c.memory_id, near.c.distance)
            .select_from(q.join(near, true()))
            .where(q.c.model == model_is, q.c.memory_id.in_(ids), near.c.distance < max_distance))
