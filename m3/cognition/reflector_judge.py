"""The Reflector's question to a chat model, and the strict reading of its answer.

The model sees the two notes (older first) and what the rule found, and answers one JSON object
``{"conflict": <bool>, "reason": "<one line>"}``. :func:`parse_verdict` accepts exactly that -- a JSON object
(or its text) with a boolean ``conflict`` and a string ``reason``, non-empty when ``conflict`` is true, and no
other keys -- and returns None for anything else, so the caller falls back to the rule; so does a failed call
(:func:`ask_model`). A reason longer than :data:`MAX_REASON` characters is cut, never trusted to be short.
"""

from __future__ import annotations

import json
from typing import Any

from m3.cognition.contradictions import Verdict
from m3.cognition.passes import ChatModel
from m3.errors import M3Error

MAX_REASON = 300
SCHEMA_HINT = '{"conflict": true|false, "reason": "what differs, in one line"}'
SYSTEM = (
    "You check a personal memory store for contradictions. You get two notes kept about the same owner, the "
    "older first. They contradict when both cannot be true now: one denies what the other says, or they give "
    "different values (a number, date, amount, place, name or other attribute) for the same thing about the "
    "same subject -- an update or a mistake. They do not contradict when they are about different things (a "
    "different customer, order, ticket, person or day), when one only adds detail, or when they say the same "
    "in other words. Answer with one JSON object only: " + SCHEMA_HINT + "."
)


def prompt(older: str, newer: str, rule: Verdict) -> str:
    """The user message: both notes and the deterministic rule's finding (a hint the model may overrule)."""
    return json.dumps({"older_note": older, "newer_note": newer,
                       "rule": {"conflict": rule.conflict, "reason": rule.reason}}, ensure_ascii=False)


def parse_verdict(answer: Any) -> Verdict | None:
    """The model's verdict, or None when ``answer`` is not exactly ``{"conflict": bool, "reason": str}``."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return None
    if not isinstance(answer, dict) or set(answer) != {"conflict", "reason"}:
        return None
    conflict, reason = answer["conflict"], answer["reason"]
    if not isinstance(conflict, bool) or not isinstance(reason, str):
        return None
    reason = " ".join(reason.split())[:MAX_REASON]
    if conflict and not reason:
        return None  # a conflict nobody can explain is not recorded on the model's word
    return Verdict(conflict, f"model: {reason}" if reason else "model: no conflict", by="model")


def ask_model(llm: ChatModel, older: str, newer: str, rule: Verdict) -> Verdict | None:
    """The model's verdict on one pair; None (use the rule) when the call fails or the answer is malformed."""
    try:
        answer = llm.complete_json(SYSTEM, prompt(older, newer, rule), schema_hint=SCHEMA_HINT)
    except M3Error:
        return None
    return with_rule_values(parse_verdict(answer), rule)


def with_rule_values(verdict: Verdict | None, rule: Verdict) -> Verdict | None:
    """A model's conflict keeps what the rule measured (the differing values) beside the model's reason."""
    if verdict is None or not verdict.conflict:
        return verdict
    return Verdict(True, verdict.reason, rule.differences, by="model")
