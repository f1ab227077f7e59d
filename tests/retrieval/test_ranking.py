"""Score fusion and MMR as pure functions: missing signals, monotonic keywords, weights, explain, diversity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from m3.protocols.messages.memory import SearchWeights
from m3.retrieval.ranking import SIGNALS, Candidate, add_proximity, explain, fuse, head, mmr, prepare

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DEFAULT = SearchWeights(dense=0.75, bm25=0.15, title=0.04, importance=0.03, recency=0.02, access=0.005,
                        pin=0.005, recency_half_life_days=30.0, mmr_lambda=0.8)
WITH_CONVERSATION = DEFAULT.model_copy(update={"conversation": 0.3, "conversation_top": 2})


def row(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"title": None, "importance": 0.5, "valid_from": NOW, "access_count": 0,
                            "pinned": False, "content": "some content", "conversation_id": None}
    return {**base, **overrides}


def cand(cid: str, *, cosine: float | None = None, bm25: float = 0.0, vector: Any = None,
         **row_fields: Any) -> Candidate:
    return Candidate(id=cid, row=row(**row_fields), cosine=cosine, bm25=bm25, vector=vector)


def unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_candidate_without_a_vector_scores_zero_on_dense_not_the_maximum() -> None:
    keyword_only, vector_only = cand("k", cosine=None, bm25=4.0), cand("v", cosine=0.8)
    fuse([keyword_only, vector_only], ["x"], DEFAULT, NOW)
    assert keyword_only.signals["dense"] == 0.0
    assert vector_only.signals["bm25"] == 0.0
    assert keyword_only.signals["bm25"] == 1.0


def test_when_nothing_matches_by_keyword_every_bm25_signal_is_zero() -> None:
    pool = [cand("a", cosine=0.5), cand("b", cosine=0.4)]
    fuse(pool, ["x"], DEFAULT, NOW)
    assert [c.signals["bm25"] for c in pool] == [0.0, 0.0]


def test_a_negative_cosine_counts_as_zero_similarity() -> None:
    c = cand("a", cosine=-0.7)
    fuse([c], [], DEFAULT, NOW)
    assert c.signals["dense"] == 0.0


def test_dense_is_the_cosine_itself_not_rescaled_by_the_pool() -> None:
    pool = [cand("a", cosine=0.5), cand("b", cosine=0.25), cand("c", cosine=None, bm25=1.0)]
    fuse(pool, ["x"], DEFAULT, NOW)
    assert [c.signals["dense"] for c in pool] == [0.5, 0.25, 0.0]


def test_bm25_is_scaled_by_the_best_match_in_the_pool() -> None:
    pool = [cand("a", bm25=8.0), cand("b", bm25=2.0)]
    fuse(pool, ["x"], DEFAULT, NOW)
    assert [c.signals["bm25"] for c in pool] == [1.0, 0.25]


@given(strong=st.floats(0.01, 1e6), ratio=st.floats(0.0, 0.999), cosine=st.none() | st.floats(-1, 1),
       bm25_weight=st.floats(0.001, 10.0))
def test_a_stronger_keyword_match_gets_a_higher_fused_score_all_else_equal(
        strong: float, ratio: float, cosine: float | None, bm25_weight: float) -> None:
    weights = DEFAULT.model_copy(update={"bm25": bm25_weight})
    better, worse = cand("a", cosine=cosine, bm25=strong), cand("b", cosine=cosine, bm25=strong * ratio)
    fuse([worse, better], ["x"], weights, NOW)
    assert better.score > worse.score


def test_weights_decide_between_a_meaning_match_and_a_keyword_match() -> None:
    by_meaning, by_keyword = cand("meaning", cosine=0.9, bm25=0.0), cand("keyword", cosine=0.2, bm25=10.0)

    def order(weights: SearchWeights) -> list[str]:
        fuse([by_meaning, by_keyword], ["x"], weights, NOW)
        return [c.id for c in sorted([by_meaning, by_keyword], key=lambda c: c.score, reverse=True)]

    assert order(DEFAULT) == ["meaning", "keyword"]
    assert order(DEFAULT.model_copy(update={"dense": 0.1, "bm25": 0.8})) == ["keyword", "meaning"]


def test_importance_pin_title_and_access_each_raise_the_score() -> None:
    plain = cand("plain")
    raised = [cand("imp", importance=0.9), cand("pin", pinned=True), cand("title", title="Deploy notes"),
              cand("read", access_count=50)]
    fuse([plain, *raised], ["deploy"], DEFAULT, NOW)
    assert all(c.score > plain.score for c in raised)


def test_recency_halves_after_one_half_life_and_a_future_fact_counts_as_new() -> None:
    old, older, future = (cand("a", valid_from=NOW - timedelta(days=30)),
                          cand("b", valid_from=NOW - timedelta(days=60)),
                          cand("c", valid_from=NOW + timedelta(days=5)))
    fuse([old, older, future], [], DEFAULT, NOW)
    assert old.signals["recency"] == pytest.approx(0.5)
    assert older.signals["recency"] == pytest.approx(0.25)
    assert future.signals["recency"] == 1.0


def test_title_overlap_is_the_share_of_query_terms_in_the_title() -> None:
    c = cand("a", title="Database migration plan")
    fuse([c], ["database", "plan", "owner", "budget"], DEFAULT, NOW)
    assert c.signals["title"] == 0.5


def test_every_signal_lies_between_zero_and_one() -> None:
    pool = [cand("a", cosine=1.0, bm25=3.0, importance=1.0, pinned=True, access_count=10_000, title="x y"),
            cand("b", cosine=-1.0, bm25=0.0, importance=0.0, valid_from=NOW - timedelta(days=3650))]
    fuse(pool, ["x", "y"], DEFAULT, NOW)
    for c in pool:
        assert set(c.signals) == set(SIGNALS)
        assert all(0.0 <= v <= 1.0 for v in c.signals.values())
        assert 0.0 <= c.score <= 1.0


def test_explain_lists_every_signal_and_the_contributions_sum_to_the_score() -> None:
    pool = [cand("a", cosine=0.7, bm25=2.0, title="Deploy", importance=0.8, pinned=True, access_count=3,
                 conversation_id="c"),
            cand("b", cosine=0.1, bm25=5.0, conversation_id="c"), cand("c", cosine=0.3)]
    weights = WITH_CONVERSATION
    fuse(pool, ["deploy"], weights, NOW)
    total = sum(weights.model_dump()[name] for name in SIGNALS)
    for c in pool:
        out = explain(c, weights, rank=1, relevance_rank=1)
        assert list(out["signals"]) == list(SIGNALS)
        assert out["own"] == pytest.approx(c.own, abs=1e-6)
        for name, part in out["signals"].items():
            assert part["value"] == pytest.approx(c.signals[name], abs=1e-6)
            assert part["weight"] == getattr(weights, name)
            assert part["contribution"] == pytest.approx(part["weight"] * part["value"] / total, abs=1e-6)
        assert sum(p["contribution"] for p in out["signals"].values()) == pytest.approx(c.score, abs=1e-5)
        assert out["score"] == pytest.approx(c.score, abs=1e-6)


# -- conversation support ------------------------------------------------------------------------

def test_conversation_support_is_the_mean_of_its_best_own_scores_with_missing_places_counting_zero() -> None:
    pool = [cand("a1", cosine=0.8, conversation_id="A"), cand("a2", cosine=0.4, conversation_id="A"),
            cand("a3", cosine=0.2, conversation_id="A"), cand("b1", cosine=0.6, conversation_id="B")]
    fuse(pool, [], WITH_CONVERSATION, NOW)
    a1, a2, _a3, b1 = pool
    assert [c.signals["conversation"] for c in pool[:3]] == pytest.approx([(a1.own + a2.own) / 2] * 3)
    assert b1.signals["conversation"] == pytest.approx(b1.own / 2)


def test_a_memory_without_a_conversation_is_its_own_support_neither_lifted_nor_lowered() -> None:
    note = cand("note", cosine=0.7)
    fuse([note, cand("turn", cosine=0.9, conversation_id="A")], [], WITH_CONVERSATION, NOW)
    assert note.signals["conversation"] == note.own
    assert note.score == pytest.approx(note.own)


def test_a_match_backed_by_its_conversation_outranks_a_slightly_better_lone_match() -> None:
    lone = cand("lone", cosine=0.62, conversation_id="L")
    backed = cand("backed", cosine=0.60, conversation_id="C")
    pool = [lone, backed, cand("support", cosine=0.55, conversation_id="C")]
    fuse(pool, [], DEFAULT, NOW)
    assert lone.score > backed.score  # the conversation signal has no weight here
    fuse(pool, [], WITH_CONVERSATION, NOW)
    assert backed.score > lone.score


def test_a_conversation_cannot_lift_a_memory_above_the_best_own_score_of_its_conversation() -> None:
    pool = [cand("best", cosine=0.9, bm25=3.0, conversation_id="C"),
            *(cand(f"weak{i}", cosine=0.3, conversation_id="C") for i in range(5))]
    fuse(pool, ["x"], WITH_CONVERSATION, NOW)
    assert all(c.score <= pool[0].score for c in pool)


# -- MMR -----------------------------------------------------------------------------------------

@given(scores=st.lists(st.floats(0, 1), min_size=1, max_size=30), k=st.integers(1, 40))
def test_mmr_with_lambda_one_is_the_relevance_order(scores: list[float], k: int) -> None:
    rng = np.random.default_rng(len(scores))
    pool = [Candidate(id=str(i), row=row(), score=s, vector=unit(*rng.normal(size=4))) for i, s in enumerate(scores)]
    expected = [c.id for c in sorted(pool, key=lambda c: c.score, reverse=True)][:k]
    assert [c.id for c in mmr(pool, k, 1.0)] == expected


def _near_duplicate_pool(with_vectors: bool) -> list[Candidate]:
    def c(cid: str, score: float, vec: np.ndarray, content: str) -> Candidate:
        return Candidate(id=cid, row=row(content=content), score=score, vector=vec if with_vectors else None)

    return [
        c("original", 0.90, unit(1, 0, 0), "The API uses PostgreSQL 16 in production"),
        c("near-copy", 0.88, unit(1, 0.05, 0), "The API uses PostgreSQL 16 in production today"),
        c("different", 0.60, unit(0, 1, 0), "Deploys happen on Thursday afternoons"),
    ]


@pytest.mark.parametrize("with_vectors", [True, False], ids=["cosine", "word-overlap"])
def test_a_lower_lambda_demotes_a_near_duplicate(with_vectors: bool) -> None:
    pool = _near_duplicate_pool(with_vectors)
    assert [c.id for c in mmr(pool, 3, 1.0)] == ["original", "near-copy", "different"]
    assert [c.id for c in mmr(pool, 3, 0.5)] == ["original", "different", "near-copy"]


def test_mmr_keeps_the_relevance_score_and_returns_distinct_items() -> None:
    pool = _near_duplicate_pool(True)
    before = {c.id: c.score for c in pool}
    chosen = mmr(pool, 2, 0.3)
    assert len(chosen) == len({c.id for c in chosen}) == 2
    assert {c.id: c.score for c in chosen} == {c.id: before[c.id] for c in chosen}


def test_without_a_named_time_the_time_weight_changes_no_score_and_no_order() -> None:
    """The time signal weighs 0 when the query names no time, so its configured weight cannot move anything."""
    def ranked(weights: SearchWeights) -> list[tuple[str, float]]:
        pool = [cand(f"m{i}", cosine=0.1 * i, bm25=float(i % 3), vector=unit(1.0, 0.1 * i), importance=0.1 * i,
                     valid_from=NOW - timedelta(days=40 * i)) for i in range(1, 8)]
        fuse(pool, ["x"], weights, NOW)
        return [(c.id, c.score) for c in mmr(pool, 4, weights.mmr_lambda)]

    assert ranked(DEFAULT.model_copy(update={"time": 0.25})) == ranked(DEFAULT)


def test_a_named_time_lifts_the_memory_valid_then_and_explain_shows_it() -> None:
    from m3.retrieval.timewords import windows

    named = windows("what happened in June 2026", NOW)
    june, march = cand("june", cosine=0.5, valid_from=datetime(2026, 6, 10, tzinfo=UTC)), cand(
        "march", cosine=0.55, valid_from=datetime(2026, 3, 10, tzinfo=UTC))
    weights = DEFAULT.model_copy(update={"time": 0.25})
    fuse([june, march], [], weights, NOW, named)
    assert june.score > march.score
    out = explain(june, weights, rank=1, relevance_rank=1, named=named)
    assert out["signals"]["time"] == {"value": 1.0, "weight": 0.25, "contribution": round(0.25 / 1.25, 6)}
    assert out["time_windows"][0]["text"] == "June 2026"


# -- neighbour support ---------------------------------------------------------------------------

WITH_NEIGHBOUR = DEFAULT.model_copy(update={"neighbour": 0.3})


def turn(cid: str, minute: int, cosine: float, conversation: str = "A") -> Candidate:
    return cand(cid, cosine=cosine, conversation_id=conversation, recorded_at=NOW + timedelta(minutes=minute))


def test_neighbour_support_is_the_best_own_value_of_the_memory_and_the_turns_recorded_next_to_it() -> None:
    pool = [turn("t3", 3, 0.1), turn("t1", 1, 0.2), turn("t2", 2, 0.9), turn("t4", 4, 0.3), turn("x", 2, 0.8, "B")]
    fuse(pool, [], WITH_NEIGHBOUR, NOW)
    t3, t1, t2, t4, x = pool
    assert t1.signals["neighbour"] == t3.signals["neighbour"] == t2.own
    assert t2.signals["neighbour"] == t2.own
    assert t4.signals["neighbour"] == t4.own  # t3 is its only neighbour, and a worse one
    assert x.signals["neighbour"] == x.own  # another conversation is never a neighbour


def test_an_answer_turn_sharing_no_word_is_lifted_above_an_unrelated_turn_by_the_question_before_it() -> None:
    question = turn("question", 1, 0.8)
    answer, unrelated = turn("answer", 2, 0.3), turn("unrelated", 9, 0.32)
    pool = [question, answer, unrelated]
    fuse(pool, [], WITH_NEIGHBOUR, NOW)
    assert unrelated.own > answer.own
    assert answer.score > unrelated.score


def test_a_memory_without_a_conversation_is_its_own_neighbour() -> None:
    note = cand("note", cosine=0.7)
    fuse([note, turn("t", 1, 0.9)], [], WITH_NEIGHBOUR, NOW)
    assert note.signals["neighbour"] == note.own
    assert note.score == pytest.approx(note.own)


POOL = st.lists(st.tuples(st.one_of(st.none(), st.floats(-1, 1)), st.floats(0, 20), st.floats(0, 1),
                          st.integers(0, 400), st.sampled_from([None, "c1", "c2"]), st.sampled_from([None, "x y", "y"]),
                          st.booleans()),
                min_size=1, max_size=30)


@given(POOL, st.integers(0, 30), st.booleans())
def test_signals_prepared_while_the_query_embeds_give_exactly_the_scores_of_fusing_at_once(
        pool: list[Any], prepared: int, keyword_only_prepared: bool) -> None:
    def build() -> list[Candidate]:
        return [cand(f"m{i}", cosine=cos, bm25=bm25, importance=imp, valid_from=NOW - timedelta(hours=hours),
                     conversation_id=conv, title=title, pinned=pinned, recorded_at=NOW - timedelta(hours=hours))
                for i, (cos, bm25, imp, hours, conv, title, pinned) in enumerate(pool)]

    weights = WITH_CONVERSATION
    at_once, in_two_steps = build(), build()
    fuse(at_once, ["x", "y"], weights, NOW)
    # The Searcher prepares the keyword hits; any subset must do (a best keyword score it missed re-fills them).
    early = [c for c in in_two_steps if c.bm25 > 0] if keyword_only_prepared else in_two_steps[:prepared]
    prepare(early, ["x", "y"], weights, NOW)
    fuse(in_two_steps, ["x", "y"], weights, NOW)
    assert [(c.id, c.signals, c.own, c.score) for c in in_two_steps] == \
        [(c.id, c.signals, c.own, c.score) for c in at_once]


# -- term proximity ------------------------------------------------------------------------------

WITH_PROXIMITY = DEFAULT.model_copy(update={"proximity": 0.3, "proximity_window": 4})


@pytest.mark.parametrize(("terms", "weight"), [(["chain"], 0.3), (["chain", "cassette"], 0.0)],
                         ids=["one-keyword", "weight-0"])
def test_with_one_keyword_or_no_weight_proximity_changes_no_score_and_no_order_and_reads_nothing(
        terms: list[str], weight: float) -> None:
    """The signal weighs 0 without a pair of keywords, and by default (weight 0): no text is read, nothing moves."""
    def ranked(weights: SearchWeights, with_proximity: bool) -> list[tuple[str, float]]:
        pool = [cand(f"m{i}", cosine=0.1 * i, bm25=float(i % 3), vector=unit(1.0, 0.1 * i), importance=0.1 * i,
                     content="chain cassette " * i) for i in range(1, 8)]
        fuse(pool, terms, weights, NOW)
        if with_proximity:
            add_proximity(pool, terms, weights, 4, read=lambda ids: pytest.fail(f"read {ids}"))
        return [(c.id, c.score) for c in mmr(pool, 4, weights.mmr_lambda)]

    weights = DEFAULT.model_copy(update={"proximity": weight})
    assert ranked(weights, True) == ranked(DEFAULT, False)


def test_a_memory_holding_the_query_words_side_by_side_outranks_one_holding_them_apart() -> None:
    terms = ["chain", "cassette"]
    apart = cand("apart", cosine=0.5, bm25=2.0, content="The chain " + "was fine and " * 10 + "the cassette too.")
    together = cand("together", cosine=0.5, bm25=2.0, content="I replaced the chain and cassette on Sunday.")
    pool = [apart, together]
    fuse(pool, terms, WITH_PROXIMITY, NOW)
    assert apart.score == together.score
    add_proximity(pool, terms, WITH_PROXIMITY, 1)
    assert together.score > apart.score
    out = explain(together, WITH_PROXIMITY, rank=1, relevance_rank=1, terms=terms)
    total = sum(WITH_PROXIMITY.model_dump()[name] for name in SIGNALS)
    assert out["signals"]["proximity"] == {"value": 1.0, "weight": 0.3, "contribution": round(0.3 / total, 6)}
    assert sum(p["contribution"] for p in out["signals"].values()) == pytest.approx(together.score, abs=1e-5)


@pytest.mark.parametrize(("k", "depth", "read_count"), [(2, 10, 10), (12, 10, 12), (2, 80, 20)])
def test_proximity_reads_only_the_best_candidates_up_to_its_depth_and_leaves_the_others_at_zero(
        k: int, depth: int, read_count: int) -> None:
    """At least k and at most MMR's pool (max(4k, 20)) are read; a lifted score stays in that pool."""
    weights = WITH_PROXIMITY.model_copy(update={"proximity_depth": depth})
    pool = [cand(f"m{i:02d}", cosine=0.02 * i, content="chain cassette") for i in range(30)]
    fuse(pool, ["chain", "cassette"], weights, NOW)
    before = {c.id: c.score for c in pool}
    read: list[list[str]] = []
    add_proximity(pool, ["chain", "cassette"], weights, k, read=read.append)
    ranked = sorted(before, key=before.__getitem__, reverse=True)
    assert read == [ranked[:read_count]]
    for c in pool:
        lifted = c.id in read[0]
        assert c.signals["proximity"] == (1.0 if lifted else 0.0)
        assert (c.score > before[c.id]) is lifted
    assert {c.id for c in head(pool, k)} == set(ranked[: max(4 * k, 20)])
