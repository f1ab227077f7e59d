"""The text of a roll-up belief: extractive from the sources' own sentences, and the strict parsing of a chat
model's answer (tested on literal answers: the chat client's HTTP stand-in lands on another branch)."""

from __future__ import annotations

import json

from m3.cognition.rollup_text import (
    MAX_TITLE,
    extractive_summary,
    model_prompt,
    parse_model_summary,
    sentences,
    shared_words,
    title_for,
)

NOTES = [
    "Production deploys happen on Friday. Staging checks must pass first.",
    "We deploy to production every Friday.\nThe release notes go to the team channel.",
    "Friday is deploy day for production.",
]


def test_sentences_split_after_terminal_punctuation_and_at_line_breaks() -> None:
    assert sentences("One. Two!  Three?\nFour; five") == ["One.", "Two!", "Three?", "Four;", "five"]


def test_the_extractive_summary_holds_only_the_sources_own_sentences_most_central_first() -> None:
    summary = extractive_summary(NOTES, 1000)
    lines = summary.splitlines()
    assert lines[0] == "Production deploys happen on Friday."
    assert all(any(line in note for note in NOTES) for line in lines)
    assert "The release notes go to the team channel." in lines


def test_a_sentence_whose_words_were_all_said_before_is_left_out() -> None:
    summary = extractive_summary(["Deploys happen on Friday.", "On Friday, deploys happen!"], 1000)
    assert summary == "Deploys happen on Friday."


def test_the_summary_stays_within_max_chars_and_cuts_only_an_overlong_first_sentence() -> None:
    summary = extractive_summary(NOTES, 60)
    assert len(summary) <= 60 and summary.splitlines()[0] == "Production deploys happen on Friday."
    long_one = "word " * 50
    assert extractive_summary([long_one], 23) == "word word word word"


def test_the_title_names_the_words_most_sources_share() -> None:
    assert shared_words(NOTES) == ["Production", "Friday", "deploy"]
    assert title_for(NOTES, [None, None, None]) == "Production, Friday, deploy (3 notes)"


def test_without_shared_words_the_title_is_the_central_sources_title_or_first_words() -> None:
    texts = ["Alpha beta gamma.", "Delta epsilon.", "Zeta eta."]
    assert title_for(texts, [None, "Greek letters", None]) == "Greek letters"
    assert title_for(texts, [None, None, None]) == "Alpha beta gamma."
    assert len(title_for(["x" * 500, "y", "z"], [None] * 3)) <= MAX_TITLE


def test_the_prompt_numbers_the_notes_and_states_the_bound() -> None:
    system, user = model_prompt(NOTES, 400)
    assert "at most 400 characters" in system and "JSON" in system
    assert user.splitlines()[1].startswith("1. Production deploys") and "2. We deploy" in user
    assert "\n" not in user.split("2. ")[1].split("\n3. ")[0]  # a note's line breaks are folded


def test_a_model_answer_with_a_summary_and_a_title_is_taken_trimmed() -> None:
    answer = json.loads('{"title": "  Friday\\n deploys ", "summary": "  Deploys go out on Fridays. "}')
    assert parse_model_summary(answer, 100) == ("Friday deploys", "Deploys go out on Fridays.")


def test_a_model_answer_without_a_usable_title_keeps_its_summary() -> None:
    for raw in ('{"summary": "Fridays."}', '{"title": "", "summary": "Fridays."}',
                '{"title": 7, "summary": "Fridays."}', json.dumps({"title": "t" * 201, "summary": "Fridays."})):
        assert parse_model_summary(json.loads(raw), 100) == (None, "Fridays.")


def test_a_model_answer_that_is_not_a_bounded_non_empty_summary_is_refused() -> None:
    for raw in ('"Deploys go out on Fridays."', "[]", "null", '{"title": "Deploys"}', '{"summary": ""}',
                '{"summary": "   "}', '{"summary": ["a", "b"]}', '{"summary": 3}',
                json.dumps({"summary": "x" * 101})):
        assert parse_model_summary(json.loads(raw), 100) is None, raw
