"""The model's verdict on a pair is read strictly; anything else falls back to the rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from m3.cognition.contradictions import Verdict, judge
from m3.cognition.reflector_judge import MAX_REASON, SCHEMA_HINT, SYSTEM, ask_model, parse_verdict, prompt
from m3.errors import Unavailable


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


class Scripted:
    """A ChatModel that answers from a list (or raises), and records what it was asked."""

    def __init__(self, *answers: Any):
        self.answers = list(answers)
        self.asked: list[tuple[str, str, str]] = []

    def complete_json(self, system: str, user: str, *, schema_hint: str = "") -> Any:
        self.asked.append((system, user, schema_hint))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


OLD, NEW = "Customer 4411 ordered 3 laptops.", "Customer 4411 ordered 4 laptops."


def test_the_model_sees_both_notes_older_first_and_what_the_rule_found() -> None:
    model = Scripted({"conflict": True, "reason": "the order changed"})
    rule = judge(OLD, NEW)
    verdict = ask_model(model, OLD, NEW, rule)
    [(system, user, hint)] = model.asked
    assert (system, hint) == (SYSTEM, SCHEMA_HINT)
    assert json.loads(user) == {"older_note": OLD, "newer_note": NEW,
                                "rule": {"conflict": True, "reason": "number: 3 vs 4"}}
    assert user == prompt(OLD, NEW, rule)
    assert verdict == Verdict(True, "model: the order changed", {"number": [["3"], ["4"]]}, by="model")


def test_a_failed_call_or_a_malformed_answer_leaves_the_pair_to_the_rule() -> None:
    rule = judge(OLD, NEW)
    # The chat client's llm_error is an M3Error (m3.cognition.passes); no subclass is declared here, since every
    # M3Error subclass lands in the generated error catalogue (docs/errors.md).
    assert ask_model(Scripted(Unavailable("endpoint down")), OLD, NEW, rule) is None
    assert ask_model(Scripted({"conflict": "maybe"}), OLD, NEW, rule) is None


def test_the_model_may_overrule_the_rule() -> None:
    verdict = ask_model(Scripted({"conflict": False, "reason": "a second order"}), OLD, NEW, judge(OLD, NEW))
    assert verdict == Verdict(False, "model: a second order", by="model")
