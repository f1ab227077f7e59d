"""Fusing chatlog_search's two legs (pure functions): keyword (BM25) and dense (cosine of the chat row's vector).

Each hit gets two signals in 0..1: ``bm25`` (its keyword score divided by the pool's best) and ``dense`` (the
cosine, used as it is, floored at 0). The score is their weighted mean with memory_search's weights
``search.weight_dense`` and ``search.weight_bm25``. A hit found by the dense leg alone is kept only when its
cosine reaches :data:`DENSE_FLOOR`: a verbatim log should not answer every query with its nearest unrelated
lines. docs/search.md "Chat log".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from m3.protocols.messages.memory import SearchWeights

#: The least cosine a message found by meaning alone (no query word) needs to be a hit.
DENSE_FLOOR = 0.3
SIGNALS = ("dense", "bm25")


@dataclass
class ChatCandidate:
    id: str
    row: Any = None
    bm25: float = 0.0
    cosine: float | None = None
    signals: dict[str, float] = field(default_factory=dict)
    score: float = 0.0


def fuse(cands: list[ChatCandidate], weights: SearchWeights) -> list[ChatCandidate]:
    """Score every candidate in place; return the hits kept (see :data:`DENSE_FLOOR`), best first, then newest."""
    best = max((c.bm25 for c in cands), default=0.0)
    w = _weights(weights)
    total = sum(w.values()) or 1.0
    for c in cands:
        c.signals = {"dense": max(0.0, c.cosine) if c.cosine is not None else 0.0,
                     "bm25": c.bm25 / best if best > 0 else 0.0}
        c.score = sum(w[name] * c.signals[name] for name in SIGNALS) / total
    kept = [c for c in cands if c.bm25 > 0 or (c.cosine is not None and c.cosine >= DENSE_FLOOR)]
    return sorted(kept, key=lambda c: (-c.score, -int(c.row.seq)))


def explain(c: ChatCandidate, weights: SearchWeights, rank: int) -> dict[str, Any]:
    w = _weights(weights)
    total = sum(w.values()) or 1.0
    return {
        "signals": {name: {"value": round(c.signals[name], 6), "weight": w[name],
                           "contribution": round(w[name] * c.signals[name] / total, 6)} for name in SIGNALS},
        "cosine": None if c.cosine is None else round(c.cosine, 6),
        "bm25_raw": round(c.bm25, 6),
        "legs": [leg for leg, found in (("keyword", c.bm25 > 0), ("dense", c.cosine is not None)) if found],
        "score": round(c.score, 6),
        "rank": rank,
        "dense_floor": DENSE_FLOOR,
        "formula": ("score = (weight_dense * max(0, cosine) + weight_bm25 * bm25 / best bm25 of the pool) / "
                    "(weight_dense + weight_bm25); a hit without a query word needs cosine >= dense_floor"),
    }


def _weights(weights: SearchWeights) -> dict[str, float]:
    return {name: float(getattr(weights, name)) for name in SIGNALS}
