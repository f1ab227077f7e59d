"""One search's candidate pool: the keyword and dense hits whose rows passed the filter, as ranking candidates.

The Searcher loads the rows (:class:`m3.retrieval.candidate_rows.CandidateRows`); this module makes them candidates,
gives each the vector and cosine it has, and computes on the spot the vectors still on their way for the best
keyword matches (fresh writes), so a memory written a moment ago does not score 0 on meaning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from m3.embed.base import Embedder
from m3.errors import EmbedderUnavailable
from m3.retrieval.candidate_rows import CandidateRows
from m3.retrieval.ranking import Candidate
from m3.store import vectors
from m3.store.fulltext import KeywordHit

log = logging.getLogger(__name__)

Vector = npt.NDArray[np.float32]
#: Most candidates per search whose vector is computed on the spot because the Embedder has not stored it yet.
PENDING_EMBED_MAX = 32


def keyword_candidates(hits: Sequence[KeywordHit], rows: Mapping[str, Any]) -> dict[str, Candidate]:
    """The keyword hits whose rows are in ``rows`` (they passed the filter), in the hits' order."""
    return {h.id: Candidate(id=h.id, row=rows[h.id], bm25=h.bm25) for h in hits if h.id in rows}


def add_dense(cands: dict[str, Candidate], dense: Sequence[tuple[str, float]], rows: Mapping[str, Any]) -> None:
    """The dense hits (id, cosine) join ``cands`` (a keyword hit found by meaning too gets its cosine)."""
    for memory_id, cosine in dense:
        c = cands.setdefault(memory_id, Candidate(id=memory_id, row=rows[memory_id]))
        c.cosine = cosine


def add_vectors(cands: Mapping[str, Candidate], stored: Mapping[str, Vector], query_vec: Vector) -> list[Candidate]:
    """Each candidate's stored vector, and its cosine where no leg gave one; the candidates without a vector."""
    for c in cands.values():
        c.vector = stored.get(c.id)
        if c.cosine is None and c.vector is not None:
            c.cosine = float(c.vector @ query_vec)
    return [c for c in cands.values() if c.vector is None]


def embed_pending(pending: list[Candidate], query_vec: Vector, loaded: CandidateRows,
                  embedder: Embedder | None) -> None:
    """Compute the vectors still on their way (fresh writes) for the best keyword matches among ``pending``.

    Without this a memory written a moment ago scores 0 on meaning and sinks below older, merely related
    memories until the Embedder catches up: read-your-writes in name only.
    """
    pending = sorted(pending, key=lambda c: c.bm25, reverse=True)[:PENDING_EMBED_MAX]
    if not pending or embedder is None:
        return
    loaded.complete([c.id for c in pending])
    try:
        matrix = embedder.embed([vectors.embed_text(c.row["title"], c.row["content"]) for c in pending])
    except EmbedderUnavailable as exc:
        log.warning("ranking fresh memories by keyword only: %s", exc.message)
        return
    for c, vec in zip(pending, matrix, strict=True):
        c.vector = vec
        c.cosine = float(vec @ query_vec)
