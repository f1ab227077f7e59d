"""The extractive summary of conversations_summarise: deterministic, representative, in the order said."""

from __future__ import annotations

from m3.retrieval.extractive import content_words, sentences, summarise

TURNS = [
    (0, "We need to move the billing service to the new cluster. Thanks!"),
    (1, "The billing migration is risky. We should rehearse the billing migration first."),
    (2, "ok"),
    (3, "I will schedule the rehearsal of the migration for Thursday."),
]


def test_sentences_are_split_per_turn_and_keep_their_turn() -> None:
    assert sentences([(0, "One. Two?\nThree!"), (1, "Four")]) == [(0, "One."), (0, "Two?"), (0, "Three!"), (1, "Four")]


def test_stop_words_and_short_words_are_not_content() -> None:
    assert content_words("We should rehearse it on a copy") == ["rehearse", "copy"]


def test_the_summary_keeps_the_sentences_richest_in_the_conversation_s_words_in_order() -> None:
    picked = summarise(TURNS, 2)
    assert [s.turn for s in picked] == sorted(s.turn for s in picked)
    assert all("migration" in s.text or "billing" in s.text for s in picked)
    assert "ok" not in [s.text for s in picked] and "Thanks!" not in [s.text for s in picked]


def test_the_same_turns_always_give_the_same_summary_and_n_bounds_it() -> None:
    assert summarise(TURNS, 3) == summarise(list(TURNS), 3)
    assert len(summarise(TURNS, 1)) == 1
    assert len(summarise(TURNS, 50)) == len(sentences(TURNS))
    assert summarise([], 3) == []
