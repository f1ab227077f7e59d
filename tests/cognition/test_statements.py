"""The Observer's rules on real sentences: what a user states, and what must not become an observation."""

from __future__ import annotations

import time

import pytest

from m3.cognition.statements import MAX_QUOTE, Statement, observation_key, quote, statements


@pytest.mark.parametrize(("text", "kind"), [
    ("I prefer window seats on long flights.", "preference"),
    ("Honestly I really love hiking in the Dolomites!", "preference"),
    ("I can't stand cilantro, it tastes like soap.", "preference"),
    ("I don't like horror movies.", "preference"),
    ("My favourite band is Radiohead.", "preference"),
    ("I'm a huge fan of Brandon Sanderson's books.", "preference"),
    ("I'm allergic to peanuts.", "preference"),
    ("My daughter is turning seven next week.", "fact"),
    ("I live in Lisbon with my partner.", "fact"),
    ("I work at a small bakery downtown.", "fact"),
    ("I just moved to Denver last month.", "fact"),
    ("I have two cats named Miso and Tofu.", "fact"),
    ("I'm a nurse on the night shift.", "fact"),
    ("I decided to take the job in Berlin.", "decision"),
    ("We'll go with the blue paint for the kitchen.", "decision"),
    ("Let's use PostgreSQL for the new service.", "decision"),
])
def test_a_users_statement_is_found_with_its_kind_and_quoted_word_for_word(text: str, kind: str) -> None:
    assert statements(text) == [Statement(kind, text)]


@pytest.mark.parametrize("text", [
    "Do you like jazz?",
    "What should I cook for a vegetarian friend?",
    "Can you recommend a good hiking trail",
    "If I moved to Oslo, would I need a car?",
    "I would love to visit Japan someday.",
    "Maybe I'll go with the red one.",
    "Suppose my budget is 500 dollars.",
    "My question is about tax returns.",
    "I wonder whether I prefer tea.",
    "My brother said I love drama.",
    "Thanks, that was helpful.",
    "Please summarise this article for me.",
])
def test_questions_hypotheticals_and_requests_give_no_statement(text: str) -> None:
    assert statements(text) == []


def test_a_turn_gives_one_statement_per_sentence_and_skips_the_rest() -> None:
    turn = ("Hi! Can you help me plan a trip? I live in Toronto. I hate early flights. "
            "What's the weather like in May? I hate early flights.")
    assert statements(turn) == [Statement("fact", "I live in Toronto."),
                                Statement("preference", "I hate early flights.")]


def test_a_long_sentence_is_quoted_up_to_the_cap_at_a_word_boundary() -> None:
    said = quote("I love " + "very " * 100 + "long walks.")
    assert len(said) <= MAX_QUOTE + 2 and said.endswith(" \u2026") and said.startswith("I love very")


def test_the_content_is_a_standalone_sentence_quoting_the_user() -> None:
    assert Statement("preference", "I prefer tea.").content == 'The user stated a preference: "I prefer tea."'
    assert quote('I love "Dune".') == "I love 'Dune'."


def test_the_key_ignores_case_punctuation_and_spacing_but_not_words() -> None:
    assert observation_key("I prefer tea.") == observation_key("i  PREFER tea!")
    assert observation_key("I prefer tea.") != observation_key("I prefer coffee.")


@pytest.mark.parametrize("text", ["I have a question about my taxes.", "I have a few questions first.",
                                  "I picked up a camera at a flea market."])
def test_asking_to_ask_and_picking_things_up_are_no_facts_or_decisions(text: str) -> None:
    assert statements(text) == []


@pytest.mark.parametrize("text", ["x" * 30_000, "I " * 15_000, "my " * 10_000, "I'm a " * 5_000,
                                  "my big red car is " * 2_000])
def test_a_huge_hostile_turn_is_scanned_in_linear_time(text: str) -> None:
    started = time.process_time()
    statements(text)
    assert time.process_time() - started < 3.0  # quadratic backtracking took over 10 s on the first of these
