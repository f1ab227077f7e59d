"""Fusion of chatlog_search's keyword and dense legs: weighted signals, the floor for meaning-only hits."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from m3.protocols.messages.memory import SearchWeights
from m3.retrieval.chat_ranking import DENSE_FLOOR, ChatCandidate, explain, fuse

WEIGHTS = SearchWeights(dense=0.6, bm25=0.3, title=0, importance=0, recency=0, access=0, pin=0,
                        recency_half_life_days=30, mmr_lambda=0.8)


def cand(chat_id: str, seq: int, bm25: float = 0.0, cosine: float | None = None) -> ChatCandidate:
    return ChatCandidate(id=chat_id, row=SimpleNamespace(seq=seq), bm25=bm25, cosine=cosine)


def test_the_score_is_the_weighted_mean_of_the_cosine_and_the_bm25_share_of_the_best() -> None:
    both, words = cand("both", 1, bm25=4.0, cosine=0.5), cand("words", 2, bm25=2.0)
    assert [c.id for c in fuse([words, both], WEIGHTS)] == ["both", "words"]
    assert both.score == pytest.approx((0.6 * 0.5 + 0.3 * 1.0) / 0.9)
    assert words.score == pytest.approx(0.3 * 0.5 / 0.9)


def test_a_hit_by_meaning_alone_needs_the_floor_and_a_keyword_hit_never_does() -> None:
    near, far = cand("near", 1, cosine=DENSE_FLOOR + 0.01), cand("far", 2, cosine=DENSE_FLOOR - 0.01)
    weak_words = cand("weak", 3, bm25=0.1, cosine=-0.2)
    kept = fuse([near, far, weak_words], WEIGHTS)
    assert {c.id for c in kept} == {"near", "weak"}
    assert weak_words.signals["dense"] == 0.0  # a negative cosine counts as none, never below


def test_explain_names_the_legs_and_sums_to_the_score() -> None:
    c = cand("c", 1, bm25=1.0, cosine=0.4)
    fuse([c], WEIGHTS)
    why = explain(c, WEIGHTS, 1)
    assert why["legs"] == ["keyword", "dense"]
    assert sum(s["contribution"] for s in why["signals"].values()) == pytest.approx(c.score, abs=1e-5)
