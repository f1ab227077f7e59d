"""The model's verdict on a pair is read strictly; anything else falls back to the rule.

Pure functions on literal answers: the end-to-end path (a chat model stand-in speaking the OpenAI wire
protocol over HTTP) is tested once the chat client lands (docs/cognitive-loop.md, "Reflector").
"""

from __future__ import annotations

import json

import pytest

from m3.cognition.contradictions import Verdict, judge
from m3.cognition.reflector_judge import MAX_REASON, SCHEMA_HINT, SYSTEM, parse_verdict, prompt, with_rule_values


@pytest.mark.parametrize(("answer", "conflict", "reason"), [
    ('{"conflict": true, "reason": "the number of cats changed from 2 to 3"}', True,
     "model: the number of cats changed from 2 to 3"),
    ('{"conflict": false, "reason": "two different customers"}', False, "model: two different customers"),
    ('{"conflict": false, "reason": ""}', False, "model: no conflict"),
    ('{"reason": "  spaced\\n out  ", "conflict": true}', True, "model: spaced out"),
])
def test_a_well_formed_answer_is_the_models_verdict(answer: str, conflict: bool, reason: str) -> None:
    verdict = parse_verdict(answer)
    assert verdict is not None
    assert (verdict.conflict, verdict.reason, verdict.by) == (conflict, reason, "model")
    assert parse_verdict(json.loads(answer)) == verdict  # the parsed JSON (what complete_json returns) alike


@pytest.mark.parametrize("answer", [
    "not json at all",
    "[true, \"x\"]",
    '{"conflict": "yes", "reason": "changed"}',
    '{"conflict": 1, "reason": "changed"}',
    '{"conflict": true}',
    '{"conflict": true, "reason": 3}',
    '{"conflict": true, "reason": "   "}',
    '{"conflict": true, "reason": "changed", "confidence": 0.9}',
    "null",
])
def test_a_malformed_answer_gives_no_verdict(answer: str) -> None:
    assert parse_verdict(answer) is None


def test_a_long_reason_is_cut() -> None:
    verdict = parse_verdict({"conflict": True, "reason": "x" * 5000})
    assert verdict is not None and len(verdict.reason) == len("model: ") + MAX_REASON


OLD, NEW = "Customer 4411 ordered 3 laptops.", "Customer 4411 ordered 4 laptops."


def test_the_model_is_shown_both_notes_older_first_and_what_the_rule_found() -> None:
    rule = judge(OLD, NEW)
    assert json.loads(prompt(OLD, NEW, rule)) == {"older_note": OLD, "newer_note": NEW,
                                                  "rule": {"conflict": True, "reason": "number: 3 vs 4"}}
    assert SCHEMA_HINT in SYSTEM and "different customer" in SYSTEM


def test_a_models_conflict_keeps_the_values_the_rule_measured() -> None:
    rule = judge(OLD, NEW)
    said = parse_verdict('{"conflict": true, "reason": "the order changed"}')
    assert with_rule_values(said, rule) == Verdict(True, "model: the order changed", {"number": [["3"], ["4"]]},
                                                   by="model")


def test_the_model_may_overrule_the_rule_and_a_malformed_answer_leaves_the_pair_to_it() -> None:
    rule = judge(OLD, NEW)
    assert with_rule_values(parse_verdict('{"conflict": false, "reason": "a second order"}'), rule) == Verdict(
        False, "model: a second order", by="model")
    assert with_rule_values(parse_verdict('{"conflict": "maybe", "reason": "?"}'), rule) is None
