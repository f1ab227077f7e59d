"""Vectors of chat rows (``chat_embeddings``): storing, dropping, finding the rows without one, and the
vectors of the rows a search may see.

A redacted row never has a vector: :func:`store` skips it and :func:`drop` removes what it had, so the old
text's meaning cannot be found once its words are gone. Rows deleted with their conversation take their
vectors along (foreign key cascade, and an explicit :func:`drop` for stores whose foreign keys are off).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, delete, func, insert, select

from m3.protocols.messages.conversations import StoreChatVectors
from m3.store.schema import chat_embeddings as ce
from m3.store.schema import chatlog as c

Matrix = npt.NDArray[np.float32]


def store(conn: Connection, model: str, dim: int, ids: Sequence[str], matrix: Matrix, at: datetime) -> list[str]:
    """Store one vector of ``model`` per chat row id (replacing one it had); rows deleted or redacted meanwhile
    are skipped. The ids stored."""
    if not ids:
        return []
    live = {row[0] for row in conn.execute(
        select(c.c.id).where(c.c.id.in_(list(ids)), c.c.redacted_at.is_(None)))}
    keep = [i for i, chat_id in enumerate(ids) if chat_id in live]
    if not keep:
        return []
    kept = [ids[i] for i in keep]
    conn.execute(delete(ce).where(ce.c.model == model, ce.c.chat_id.in_(kept)))
    conn.execute(insert(ce), [{"chat_id": ids[i], "model": model, "dim": dim, "vector": matrix[i], "created_at": at}
                              for i in keep])
    return kept


def store_sent(conn: Connection, msg: StoreChatVectors, at: datetime) -> list[str]:
    """:func:`store` the vectors of a :class:`StoreChatVectors` (little-endian float32 bytes)."""
    matrix = np.frombuffer(msg.vectors, dtype="<f4").reshape(len(msg.ids), msg.dim)
    return store(conn, msg.model, msg.dim, msg.ids, matrix, at)


def drop(conn: Connection, ids: Sequence[str]) -> None:
    """Remove every vector of the chat rows ``ids`` (redaction, deletion)."""
    if ids:
        conn.execute(delete(ce).where(ce.c.chat_id.in_(list(ids))))


def missing(conn: Connection, model: str, after_seq: int, limit: int) -> list[tuple[int, str, str]]:
    """Unredacted chat rows after ``after_seq`` without a vector of ``model``, by seq: (seq, id, content)."""
    rows = conn.execute(
        select(c.c.seq, c.c.id, c.c.content)
        .where(c.c.seq > after_seq, c.c.redacted_at.is_(None), ~_has_vector(model))
        .order_by(c.c.seq).limit(limit)).all()
    return [(int(row[0]), row[1], row[2]) for row in rows]


def texts(conn: Connection, model: str, ids: Sequence[str]) -> dict[str, str]:
    """Content of the chat rows among ``ids`` that still need a vector of ``model`` (unredacted, none yet)."""
    if not ids:
        return {}
    rows = conn.execute(select(c.c.id, c.c.content).where(
        c.c.id.in_(list(ids)), c.c.redacted_at.is_(None), ~_has_vector(model))).all()
    return {row[0]: row[1] for row in rows}


def nearest(conn: Connection, model: str, query: Matrix, where: Any, n: int,
            limit: int = 50_000) -> list[tuple[str, float]]:
    """The ``n`` chat rows matching ``where`` whose ``model`` vectors are closest to ``query``: (id, cosine), best
    first. Exact: the filtered rows' vectors are compared in memory (at most ``limit`` of them, the newest)."""
    rows = conn.execute(select(ce.c.chat_id, ce.c.vector).join(c, c.c.id == ce.c.chat_id)
                        .where(ce.c.model == model, ce.c.dim == int(query.shape[0]), where)
                        .order_by(c.c.seq.desc()).limit(limit)).all()
    if not rows or n <= 0:
        return []
    sims = np.vstack([row[1] for row in rows]).astype(np.float32, copy=False) @ query
    order = np.argsort(-sims, kind="stable")[:n]
    return [(rows[int(i)][0], float(sims[int(i)])) for i in order]


def vectors_of(conn: Connection, model: str, ids: Sequence[str]) -> dict[str, Matrix]:
    """Stored ``model`` vectors of the chat rows among ``ids`` that have one."""
    if not ids:
        return {}
    rows = conn.execute(select(ce.c.chat_id, ce.c.vector).where(ce.c.model == model, ce.c.chat_id.in_(list(ids))))
    return {row[0]: np.asarray(row[1], dtype=np.float32) for row in rows}


def count(conn: Connection, model: str | None = None, where: Any = None) -> int:
    """Chat vectors (of ``model`` when given) of the chat rows matching ``where``."""
    query = select(func.count()).select_from(ce.join(c, c.c.id == ce.c.chat_id))
    if model is not None:
        query = query.where(ce.c.model == model)
    if where is not None:
        query = query.where(where)
    return int(conn.execute(query).scalar_one())


def _has_vector(model: str) -> Any:
    """Whether the chat row has a vector of ``model`` (a correlated EXISTS)."""
    return select(ce.c.chat_id).where(ce.c.model == model, ce.c.chat_id == c.c.id).exists()
