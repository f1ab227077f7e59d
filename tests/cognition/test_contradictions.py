"""The Reflector's rule on literal sentence pairs: what is a contradiction candidate, and what is not."""

from __future__ import annotations

import pytest

from m3.cognition.contradictions import judge

CONTRADICTIONS = [
    ("I have 2 cats at home.", "These days I have 3 cats at home, all rescued.", "number: 2 vs 3"),
    ("I lead a team of 4 engineers.", "My team has grown: I now lead five engineers.", "number: 4 vs 5"),
    ("I've added 17 new postcards since I started collecting again.",
     "I just realized I've added 25 new postcards to my collection.", "number: 17 vs 25"),
    ("The rent is $1,200 a month.", "The rent is $1,350 a month now.", "amount: 1200 vs 1350"),
    ("The salary is 4000 EUR.", "The salary is 4200 EUR.", "amount: 4000 vs 4200"),
    ("I go to the gym at 7:00 pm.", "I usually go to the gym at 6:00 pm.", "time: 7:00 pm vs 6:00 pm"),
    ("My cocktail class is on Thursday.", "My cocktail class is on Fridays.", "date: thursday vs friday"),
    ("I finished 4 projects in the painting class.", "I just finished my 5th project in the painting class.",
     "number: 4 vs 5"),
    ("I do yoga twice a week.", "I do yoga three times a week.", "number: 2 vs 3"),
    ("My favourite colour is blue.", "My favourite colour is green.", "attribute favourite colour: blue vs green"),
    ("I eat meat most days.", "I don't eat meat any more.", "negation: one note denies what the other says"),
    ("Room 12 has a projector.", "Room 12 has no projector.", "negation: one note denies what the other says"),
]

NOT_CONTRADICTIONS = [
    # Another subject: identifiers, labelling numbers or proper names differ on both sides.
    ("Customer 4411 ordered 3 laptops.", "Customer 4412 ordered 3 laptops.", "different subject: id: 4411 vs 4412"),
    ("Employee 4400 in Berlin earns 1200 EUR a month.", "Employee 4407 in Berlin earns 1200 EUR a month.",
     "different subject: id: 4400 vs 4407"),
    ("Ticket OPS-120 was assigned to Alice.", "Ticket OPS-123 was assigned to Alice.",
     "different subject: id: ops-120 vs ops-123"),
    ("Alice can be reached about the Berlin office.", "Bruno can be reached about the Berlin office.",
     "different subject: name: alice vs bruno"),
    ("The review in room 123 is at 9:30.", "The review in room 126 is at 9:30.", "different subject: id: 123 vs 126"),
    # Another occasion: a fact dated differently (a reading a day).
    ("Sensor S-126 read 1270.34 kPa on 2026-09-11.", "Sensor S-126 read 1270.34 kPa on 2026-09-16.",
     "different subject: occasion: 2026-09-11 vs 2026-09-16"),
    # Restatements: the same anchors in other words, or a detail only one side gives.
    ("Customer 4411 ordered 3 laptops on 2026-11-02.", "On 2026-11-02, customer 4411 placed an order for 3 laptops.",
     "no disagreement found"),
    ("I have 2 cats at home.", "I have two cats.", "no disagreement found"),
    ("I moved to Denver.", "I moved to Denver in 2021 with 2 suitcases.", "no disagreement found"),
    # Negations about different things, and two denials.
    ("I like tea in the morning.", "I don't drive to work on Mondays.", "no disagreement found"),
    ("I don't like tea.", "I do not like tea at all.", "no disagreement found"),
]


@pytest.mark.parametrize(("a", "b", "reason"), CONTRADICTIONS, ids=[r for _, _, r in CONTRADICTIONS])
def test_a_pair_that_disagrees_on_a_value_or_a_negation_is_a_candidate_whose_reason_says_what_differs(
        a: str, b: str, reason: str) -> None:
    verdict = judge(a, b)
    assert (verdict.conflict, verdict.reason) == (True, reason)
    assert verdict.by == "rule"


@pytest.mark.parametrize(("a", "b", "reason"), NOT_CONTRADICTIONS, ids=[r for _, _, r in NOT_CONTRADICTIONS])
def test_distinct_facts_restatements_and_unrelated_negations_are_no_candidate(a: str, b: str, reason: str) -> None:
    verdict = judge(a, b)
    assert (verdict.conflict, verdict.reason) == (False, reason)


def test_the_rule_is_symmetric_in_its_verdict() -> None:
    for a, b, _ in CONTRADICTIONS + NOT_CONTRADICTIONS:
        assert judge(a, b).conflict == judge(b, a).conflict, (a, b)


def test_the_differences_name_the_values_of_each_side() -> None:
    assert judge("I have 2 cats.", "I have 3 cats.").differences == {"number": [["2"], ["3"]]}
