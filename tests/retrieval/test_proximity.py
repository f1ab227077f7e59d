"""Term proximity: pairs of the query's neighbouring keywords, found close together in a text."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from m3.retrieval.proximity import closeness, key, pairs

WORDS = st.sampled_from(["bike", "chain", "cassette", "replaced", "ride", "sunday", "the", "a", "group", "Chain"])


def test_pairs_are_the_neighbouring_terms_in_query_order_without_repeats() -> None:
    assert pairs(["bike", "chain", "cassette"]) == [("bike", "chain"), ("chain", "casset")]
    assert pairs(["bike", "chain", "bike", "chain"]) == [("bike", "chain"), ("chain", "bike")]


def test_fewer_than_two_terms_or_two_forms_of_one_word_make_no_pair() -> None:
    assert pairs([]) == [] and pairs(["bike"]) == []
    assert pairs(["photograph", "photography"]) == []


def test_words_are_compared_by_their_first_six_letters_in_lower_case() -> None:
    assert key("Photography") == key("photograph") == "photog"
    assert key("applied") != key("application")


def test_a_pair_counts_within_the_window_in_either_order_and_not_beyond_it() -> None:
    wanted = pairs(["chain", "cassette"])
    assert closeness("I replaced the chain and the cassette", wanted, 4) == 1.0
    assert closeness("the cassette and the chain", wanted, 4) == 1.0
    assert closeness("chain one two three four cassette", wanted, 4) == 0.0
    assert closeness("chain one two three cassette", wanted, 4) == 1.0


def test_closeness_is_the_share_of_pairs_held() -> None:
    wanted = pairs(["sunday", "group", "rides", "bike"])
    assert closeness("our Sunday group meets; rides on the bike are long", wanted, 2) == 2 / 3


def test_no_pairs_or_no_text_is_zero() -> None:
    assert closeness("chain cassette", [], 4) == 0.0
    assert closeness(None, pairs(["chain", "cassette"]), 4) == 0.0
    assert closeness("", pairs(["chain", "cassette"]), 4) == 0.0


def reference(text: str, wanted: list[tuple[str, str]], window: int) -> float:
    """Every word of the text, every pair of places: the definition, slowly."""
    keys = [key(w) for w in re.findall(r"\w+", text.lower())]
    held = [any(abs(i - j) <= window for i, x in enumerate(keys) if x == a for j, y in enumerate(keys) if y == b)
            for a, b in wanted]
    return sum(held) / len(held) if held else 0.0


@given(st.lists(WORDS, max_size=6), st.lists(WORDS, max_size=40), st.integers(0, 10))
def test_closeness_agrees_with_checking_every_pair_of_places(terms: list[str], words: list[str], window: int) -> None:
    text = " ".join(words)
    value = closeness(text, pairs(terms), window)
    assert value == reference(text, pairs(terms), window)
    assert 0.0 <= value <= 1.0


@given(st.text(max_size=200), st.lists(st.text(min_size=1, max_size=9), max_size=5), st.integers(0, 6), st.data())
def test_closeness_agrees_with_the_definition_on_any_text(text: str, extra: list[str], window: int,
                                                          data: st.DataObject) -> None:
    """Any characters (cases that change length when lowered, marks, digits, underscores): terms drawn from the
    text's own words, or anything."""
    words = re.findall(r"\w+", text) or ["x"]
    terms = [t.lower() for t in data.draw(st.lists(st.sampled_from(words), max_size=5))] + extra
    wanted = pairs(terms)
    assert closeness(text, wanted, window) == reference(text, wanted, window)
