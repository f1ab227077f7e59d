"""chatlog_search (run by the Searcher): the keyword leg (full-text index) and the dense leg (the chat rows' stored
vectors of the model search uses), fused by :mod:`m3.retrieval.chat_ranking`.

Both legs run in SQL under one clause (isolation, scope and the caller's filters), so a row the reader may
not see is never a candidate. Keyword hits whose vector is not stored yet (written a moment ago) get one
computed on the spot, as memory_search does, so a fresh message is not ranked on its words alone.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from sqlalchemy import Connection, select

from m3.embed.base import Embedder
from m3.errors import EmbedderUnavailable
from m3.protocols.messages.memory import SearchChat, SearchWeights
from m3.protocols.tools import chatlog as chat
from m3.retrieval import chat_ranking as ranking
from m3.store import chat_vectors, fulltext
from m3.store.schema import chatlog

log = logging.getLogger(__name__)

#: Most keyword hits per search whose vector is computed on the spot.
PENDING_EMBED_MAX = 32


def search(conn: Connection, msg: SearchChat, where: Any, *, k: int, n: int, model: str,
           embedder: Embedder | None, weights: SearchWeights,
           query_embedder: Embedder | None = None) -> chat.ChatlogSearchResult:
    """The best ``k`` chat rows matching ``where`` for ``msg.query`` (``n`` candidates per leg); the query embeds
    with ``query_embedder`` (default ``embedder``), messages without a stored vector with ``embedder``."""
    cands = {row.id: ranking.ChatCandidate(id=row.id, row=row, bm25=score)
             for row, score in fulltext.chat_hits(conn, msg.query, where, n)}
    query_vec = _query_vector(query_embedder or embedder, msg.query)
    if query_vec is not None:
        _dense_leg(conn, cands, model, query_vec, where, n)
        _pending(conn, [c for c in cands.values() if c.cosine is None], model, embedder, query_vec)
    chosen = ranking.fuse(list(cands.values()), weights)[:k]
    items = [_item(c, weights, rank, msg.explain, model) for rank, c in enumerate(chosen, 1)]
    return chat.ChatlogSearchResult(count=len(items), items=items, query=msg.query)


def _query_vector(embedder: Embedder | None, query: str) -> Any:
    if embedder is None:
        return None
    try:
        return embedder.embed([query])[0]
    except EmbedderUnavailable as exc:
        log.warning("searching the chat log by keyword only: %s", exc.message)
        return None


def _dense_leg(conn: Connection, cands: dict[str, ranking.ChatCandidate], model: str, query_vec: Any, where: Any,
               n: int) -> None:
    """Add the dense leg's top ``n`` and the cosine of every keyword hit with a stored vector."""
    near = dict(chat_vectors.nearest(conn, model, query_vec, where, n))
    fresh = [chat_id for chat_id in near if chat_id not in cands]
    if fresh:
        for row in conn.execute(select(chatlog).where(chatlog.c.id.in_(fresh))):
            cands[row.id] = ranking.ChatCandidate(id=row.id, row=row)
    unknown = [c.id for c in cands.values() if c.id not in near]
    stored = chat_vectors.vectors_of(conn, model, unknown)
    for c in cands.values():
        if c.id in near:
            c.cosine = near[c.id]
        elif c.id in stored:
            c.cosine = float(stored[c.id] @ query_vec)


def _pending(conn: Connection, pending: list[ranking.ChatCandidate], model: str, embedder: Embedder | None,
             query_vec: Any) -> None:
    """Cosines for the best keyword hits still without a stored vector (not redacted ones: they have none)."""
    pending = sorted((c for c in pending if c.row.redacted_at is None), key=lambda c: c.bm25,
                     reverse=True)[:PENDING_EMBED_MAX]
    if not pending or embedder is None:
        return
    try:
        matrix = np.asarray(embedder.embed([c.row.content for c in pending]), dtype=np.float32)
    except EmbedderUnavailable as exc:
        log.warning("ranking fresh chat messages by keyword only: %s", exc.message)
        return
    for c, vec in zip(pending, matrix, strict=True):
        c.cosine = float(vec @ query_vec)


def _item(c: ranking.ChatCandidate, weights: SearchWeights, rank: int, explain: bool, model: str) -> chat.ChatItem:
    row = c.row
    explanation = None
    if explain:
        explanation = ranking.explain(c, weights, rank)
        explanation["dense_model"] = model if c.cosine is not None else None
    return chat.ChatItem(
        id=row.id, conversation_id=row.conversation_id, role=row.role, content=row.content, turn=row.turn,
        at=row.at, agent_id=row.agent_id, scope=row.scope, bm25_score=round(c.bm25, 6),
        dense_score=None if c.cosine is None else round(c.cosine, 6), score=round(c.score, 6),
        explanation=explanation)
