"""Score fusion and MMR diversity for memory search (pure functions).

Every candidate gets signals in 0..1 (:data:`SIGNALS`); the fused score is their weighted mean. The
cosine is used as it is, never rescaled per pool; BM25 is divided by the pool's best; a missing signal
is 0, never the maximum. ``own`` is the mean of the memory's own signals, and the ``conversation`` signal
the mean of the ``conversation_top`` best ``own`` values of its conversation in the pool (its own value
without a conversation). The ``neighbour`` signal is the best ``own`` value among the memory and the
memories written just before and after it in its conversation (its neighbours in the pool, in the order
they were recorded): an answer turn that shares no word with the query is lifted by the question turn
next to it. MMR reorders the pool; the score returned stays the fused relevance. Each
signal, and the measurements behind the default weights: docs/search.md.

The ``time`` signal counts only when the query names a time (:mod:`m3.retrieval.timewords`): then it is the
closeness of the memory's valid time to the named windows, with weight
``time``; otherwise its weight is 0, so a query without a time ranks exactly as if the signal did not exist.

The ``proximity`` signal (:mod:`m3.retrieval.proximity`) counts only when the query has two keyword terms or more,
and only for the best ``max(k, proximity_depth)`` candidates (reading their text is what it costs); it is 0 for
the others, and :func:`fuse` leaves it at 0 for all: :func:`add_proximity` adds it once their texts are read.
"""

from __future__ import annotations

import math
import operator
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from m3.protocols.messages.memory import SearchWeights
from m3.retrieval import native, proximity, timewords

#: The memory's own signals, then the ones taken from its conversation, then the one read in the head's texts.
OWN_SIGNALS = ("dense", "bm25", "title", "importance", "recency", "access", "pin", "time")
SIGNALS = (*OWN_SIGNALS, "conversation", "neighbour", "proximity")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WORD = re.compile(r"\w+", re.UNICODE)
_LOG_101 = math.log1p(100)


@dataclass
class Candidate:
    id: str
    row: Any
    cosine: float | None = None
    bm25: float = 0.0
    vector: npt.NDArray[np.float32] | None = None
    signals: dict[str, float] = field(default_factory=dict)
    #: Weighted mean of the own signals (before the conversation signal).
    own: float = 0.0
    score: float = 0.0
    #: The pool's best keyword score :func:`prepare` filled ``signals`` with (None: not prepared).
    prepared_best: float | None = None


def prepare(cands: Sequence[Candidate], terms: list[str], weights: SearchWeights, now: datetime,
            named: Sequence[timewords.Window] = ()) -> None:
    """Fill the signals of ``cands`` that need no query vector (all but ``dense``), while the query still embeds.

    :func:`fuse`, given the same ``terms``, ``weights``, ``now`` and ``named``, keeps them for a candidate when the
    pool's best keyword score is the one they were filled with (dense hits add none), so the scores are exactly
    those :func:`fuse` alone gives; otherwise it fills them again.
    """
    best_bm25 = max((c.bm25 for c in cands), default=0.0)
    wanted, windows = set(terms), list(named)
    for c in cands:
        c.signals = _signals(c, best_bm25, wanted, weights, now, windows)
        c.prepared_best = best_bm25


def fuse(cands: list[Candidate], terms: list[str], weights: SearchWeights, now: datetime,
         named: Sequence[timewords.Window] = ()) -> None:
    """Fill ``signals``, ``own`` and ``score`` of every candidate in place (keeping what :func:`prepare` filled).

    ``now`` is the time the question is asked (recency counts from it); ``named`` the windows of time the
    question names (none: the ``time`` signal has no weight).
    """
    best_bm25 = max((c.bm25 for c in cands), default=0.0)
    wanted = set(terms)
    windows = list(named)
    w = weight_map(weights, timed=bool(named), paired=bool(proximity.pairs(terms)))
    own_total = sum(w[name] for name in OWN_SIGNALS) or 1.0
    total = sum(w.values()) or 1.0
    # A signal of weight 0 adds exactly 0.0 to a sum: leaving it out changes no score, and saves most of the
    # Python time per candidate when a mode weighs a single signal. The products are summed in the order of
    # SIGNALS either way (map and itemgetter only take the per-candidate loop out of Python's bytecode).
    own_values, own_weights = _weighted(w, OWN_SIGNALS)
    all_values, all_weights = _weighted(w, SIGNALS)
    for c in cands:
        if c.prepared_best != best_bm25:
            c.signals = _signals(c, best_bm25, wanted, weights, now, windows)
        signals = c.signals
        signals["dense"] = max(0.0, c.cosine) if c.cosine is not None else 0.0
        c.own = sum(map(operator.mul, own_weights, own_values(signals))) / own_total
    conversations = [c.row.get("conversation_id") for c in cands]
    _conversation_support(cands, conversations, weights.conversation_top)
    _neighbour_support(cands, conversations)
    for c in cands:
        c.score = sum(map(operator.mul, all_weights, all_values(c.signals))) / total


def head(cands: Sequence[Candidate], k: int) -> list[Candidate]:
    """The best ``max(4k, 20)`` candidates by score, best first: the pool :func:`mmr` picks ``k`` from."""
    return sorted(cands, key=lambda c: c.score, reverse=True)[: max(k * 4, 20)]


def add_proximity(cands: Sequence[Candidate], terms: list[str], weights: SearchWeights, k: int,
                  named: Sequence[timewords.Window] = (), read: Callable[[list[str]], None] | None = None) -> None:
    """Set the ``proximity`` signal of the best of ``cands`` (fused by :func:`fuse` with the same ``terms``,
    ``weights`` and ``named``) and add it to their scores.

    Only the best ``max(k, weights.proximity_depth)`` of the head are read; ``read`` is given their ids before their
    ``content`` is read (None: the rows hold it), and only when the signal weighs anything. A score only rises, so
    the head stays the same set and the others, at 0, could not have entered it."""
    wanted = proximity.pairs(terms)
    w = weight_map(weights, timed=bool(named), paired=bool(wanted))
    if not w["proximity"]:
        return
    total = sum(w.values())
    values, all_weights = _weighted(w, SIGNALS)
    best = head(cands, k)[: max(k, weights.proximity_depth)]
    if read is not None:
        read([c.id for c in best])
    for c in best:
        c.signals["proximity"] = proximity.closeness(c.row["content"], wanted, weights.proximity_window)
        c.score = sum(map(operator.mul, all_weights, values(c.signals))) / total


def _weighted(w: dict[str, float], names: Sequence[str]) -> tuple[Callable[[dict[str, float]], Any], list[float]]:
    """For the signals among ``names`` that weigh anything: what reads their values from a candidate's signals
    (always a tuple), and their weights, in the same order."""
    kept = [name for name in names if w[name]]
    getter = operator.itemgetter(*kept) if len(kept) > 1 else (lambda signals: tuple(signals[n] for n in kept))
    return getter, [w[name] for name in kept]


def _signals(c: Candidate, best_bm25: float, wanted: set[str], weights: SearchWeights, now: datetime,
             windows: list[timewords.Window]) -> dict[str, float]:
    """The memory's own signals; ``dense`` is 0.0 here (:func:`fuse` sets it), first so the order stays fixed."""
    row = c.row
    return {
        "dense": 0.0,
        "bm25": c.bm25 / best_bm25 if best_bm25 > 0 else 0.0,
        "title": _title_overlap(row["title"], wanted),
        "importance": float(row["importance"]),
        "recency": _recency(row["valid_from"], now, weights.recency_half_life_days),
        "access": min(1.0, math.log1p(row["access_count"]) / _LOG_101),
        "pin": 1.0 if row["pinned"] else 0.0,
        "time": time_signal(row, windows) if windows else 0.0,
        "proximity": 0.0,
    }


def _conversation_support(cands: list[Candidate], conversations: list[str | None], top: int) -> None:
    """Set the ``conversation`` signal: the mean of the ``top`` best own relevances in the memory's conversation
    (``conversations``: each candidate's)."""
    by_conversation: dict[str, list[Candidate]] = defaultdict(list)
    for c, conversation in zip(cands, conversations, strict=True):
        if conversation is None:
            c.signals["conversation"] = c.own
        else:
            by_conversation[conversation].append(c)
    for members in by_conversation.values():
        best = sorted((c.own for c in members), reverse=True)[: max(1, top)]
        support = sum(best) / max(1, top)
        for c in members:
            c.signals["conversation"] = support


def _neighbour_support(cands: list[Candidate], conversations: list[str | None]) -> None:
    """Set the ``neighbour`` signal: the best own relevance of the memory and its pool neighbours.

    Neighbours are the memories of the same conversation recorded just before and just after it, among
    the pool (ordered by ``recorded_at``, then id). The memory's own value is included, so the signal
    only ever lifts a memory towards a better neighbour and never lowers the best one. A memory without
    a conversation is its own neighbour (the signal equals its own relevance); ``conversations``: each
    candidate's."""
    by_conversation: dict[str, list[Candidate]] = defaultdict(list)
    for c, conversation in zip(cands, conversations, strict=True):
        c.signals["neighbour"] = c.own
        if conversation is not None:
            by_conversation[conversation].append(c)
    for members in by_conversation.values():
        members.sort(key=lambda c: (c.row.get("recorded_at") or _EPOCH, c.id))
        owns = [c.own for c in members]
        for i, c in enumerate(members):
            c.signals["neighbour"] = max(owns[max(0, i - 1): i + 2])


def time_signal(row: Any, named: list[timewords.Window]) -> float:
    """Closeness of the memory's valid time to the ``named`` windows.

    Dates the content mentions (read relative to the valid time) were measured too and left out: no gain
    on the dev sets, and parsing every candidate's text cost ~50 ms a search (docs/search.md)."""
    return timewords.closeness(row["valid_from"], named)


def weight_map(weights: SearchWeights, *, timed: bool, paired: bool) -> dict[str, float]:
    """Each signal's weight; ``time`` weighs 0 unless the query named a time (``timed``), ``proximity`` unless it
    has a pair of terms (``paired``)."""
    off = {name for name, on in (("time", timed), ("proximity", paired)) if not on}
    return {name: 0.0 if name in off else float(getattr(weights, name)) for name in SIGNALS}


def explain(c: Candidate, weights: SearchWeights, rank: int, relevance_rank: int,
            named: Sequence[timewords.Window] = (), terms: Sequence[str] = ()) -> dict[str, Any]:
    w = weight_map(weights, timed=bool(named), paired=bool(proximity.pairs(terms)))
    total = sum(w.values()) or 1.0
    return {
        "signals": {
            name: {"value": round(c.signals[name], 6), "weight": w[name],
                   "contribution": round(w[name] * c.signals[name] / total, 6)}
            for name in SIGNALS
        },
        "cosine": None if c.cosine is None else round(c.cosine, 6),
        "bm25_raw": round(c.bm25, 6),
        "own": round(c.own, 6),
        "conversation_top": weights.conversation_top,
        "time_windows": [{"text": t.text, "start": t.start.isoformat(), "end": t.end.isoformat()} for t in named],
        "score": round(c.score, 6),
        "relevance_rank": relevance_rank,
        "mmr_rank": rank,
        "formula": ("own = weighted mean of the memory's own signals; conversation = mean of the conversation_top "
                    "best own values in its conversation (its own value without one); neighbour = best own value "
                    "of the memory and the memories recorded just before and after it in its conversation; "
                    "proximity = share of the query's neighbouring keyword pairs found within proximity_window "
                    "words of each other, read for the best max(k, proximity_depth) by score (0 for the others); "
                    "score = sum(weight * value) / sum(weights) over every signal (time weighs 0 when the query "
                    "names no time, proximity when it has fewer than two keywords); "
                    "order = MMR(lambda) over the pool"),
    }


def _title_overlap(title: str | None, wanted: set[str]) -> float:
    if not title or not wanted:
        return 0.0
    words = {t.lower() for t in _WORD.findall(title)}
    return len(words & wanted) / len(wanted)


def _recency(valid_from: datetime, now: datetime, half_life_days: float) -> float:
    age_days = max(0.0, (now - valid_from).total_seconds() / 86400.0)
    if half_life_days <= 0:
        return 0.0
    return float(0.5 ** (age_days / half_life_days))


def mmr(cands: list[Candidate], k: int, lam: float) -> list[Candidate]:
    """Maximal marginal relevance: pick k items trading relevance against similarity to those picked.

    Similarity between two memories is the cosine of their vectors (the reference dot of
    :mod:`m3.retrieval.native`), or the word-set Jaccard when either has no vector yet. A pool whose
    every member has a vector is picked by :func:`native.mmr_order` (the same arithmetic, native or numpy).
    """
    pool = head(cands, k)
    if lam >= 1.0 or len(pool) <= 1:
        return pool[:k]
    vectors = [c.vector for c in pool]
    if all(v is not None for v in vectors) and len({v.shape for v in vectors if v is not None}) == 1:
        matrix = np.stack([np.asarray(v, dtype=np.float32) for v in vectors if v is not None])
        scores = np.array([c.score for c in pool], dtype=np.float64)
        return [pool[i] for i in native.mmr_order(matrix, scores, k, lam)]
    chosen: list[Candidate] = []
    max_sim = [0.0] * len(pool)
    words = [None] * len(pool)  # type: list[set[str] | None]
    remaining = list(range(len(pool)))
    while remaining and len(chosen) < k:
        best = max(remaining, key=lambda i: lam * pool[i].score - (1 - lam) * max_sim[i])
        remaining.remove(best)
        picked = pool[best]
        chosen.append(picked)
        for i in remaining:
            max_sim[i] = max(max_sim[i], _similarity(pool[i], picked, words, i, best))
    return chosen


def _similarity(a: Candidate, b: Candidate, words: list[set[str] | None], ia: int, ib: int) -> float:
    if a.vector is not None and b.vector is not None:
        return max(0.0, native.pair_dot(np.asarray(a.vector, dtype=np.float32), np.asarray(b.vector, dtype=np.float32)))
    for idx, cand in ((ia, a), (ib, b)):
        if words[idx] is None:
            words[idx] = {t.lower() for t in _WORD.findall(cand.row["content"])}
    wa, wb = words[ia] or set(), words[ib] or set()
    union = wa | wb
    return len(wa & wb) / len(union) if union else 0.0
