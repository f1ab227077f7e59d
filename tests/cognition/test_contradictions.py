"""The Reflector's rule on literal sentence pairs: what is a contradiction candidate, and what is not."""

from __future__ import annotations

import pytest

from m3.cognition.contradictions import judge, restates

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
    # A first-person note whose name changed in the same sentence: the owner's value, not another subject.
    ("I was thinking about my recent family trip to Hawaii.", "I was thinking about my recent family trip to Paris.",
     "name: hawaii vs paris"),
    ("I'm thinking of using my new Instant Pot for soups.", "I'm thinking of using my new Air Fryer for soups.",
     "name: instant, pot vs air, fryer"),
    ("My language class with Juan is on Wednesday evening.", "My language class with Maria is on Thursday evening.",
     "name: juan vs maria; date: wednesday vs thursday"),
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
    # A name in first-person notes that do not share their sentence is another subject too.
    ("I met Anna at the climbing gym on Tuesday.", "I'm flying to Rome next week with my sister.",
     "different subject: name: anna vs rome"),
    # ... and so is one that does not stand in the same place (after the same two words).
    ("I'm planning a trip to Japan: can you recommend attractions in Kyoto?",
     "I'm planning a trip to Japan: can you recommend some places in Tokyo?",
     "different subject: name: kyoto vs tokyo"),
    # "US" is a country, not the speaker: a third-person record keeps its names as subjects.
    ("The US office reports to Alice.", "The US office reports to Bruno.", "different subject: name: alice vs bruno"),
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


DUPLICATES = [
    ("Sensor S-120 in Berlin read 1200.00 kPa on 2026-09-01.",
     "On 2026-09-01 the pressure at sensor S-120 (Berlin) was 1200.00 kPa.",
     "duplicate: the same id=s-120, name=berlin, number=1200, occasion=2026-09-01 in other words"),
    ("Ticket OPS-120 was assigned to Alice with priority 2.", "Alice now owns ticket OPS-120, priority 2.",
     "duplicate: the same id=ops-120, name=alice, number=2 in other words"),
]

NOT_DUPLICATES = [
    ("Customer 4411 ordered 3 laptops.", "Customer 4412 ordered 3 laptops.", "the anchors differ"),
    ("I moved to Denver.", "I moved to Denver in 2021.", "the anchors differ"),  # a detail only one side gives
    ("I like smoked brisket.", "I love smoked brisket.", "too few anchors to call it the same fact"),
    # A capitalised word opening both sentences is capitalised by grammar: it pins nothing.
    ("Can you give me some tips on smoked brisket?", "Can you share a recipe for smoked brisket?",
     "too few anchors to call it the same fact"),
]


@pytest.mark.parametrize(("a", "b", "reason"), DUPLICATES, ids=[r for _, _, r in DUPLICATES])
def test_two_notes_that_agree_on_every_anchor_are_a_duplicate_that_names_the_anchors(
        a: str, b: str, reason: str) -> None:
    verdict = restates(a, b)
    assert (verdict.conflict, verdict.kind, verdict.reason) == (True, "duplicate", reason)
    assert restates(b, a).conflict


@pytest.mark.parametrize(("a", "b", "reason"), NOT_DUPLICATES, ids=[r for _, _, r in NOT_DUPLICATES])
def test_a_differing_or_missing_anchor_or_no_anchor_at_all_is_no_duplicate(a: str, b: str, reason: str) -> None:
    verdict = restates(a, b)
    assert (verdict.conflict, verdict.reason) == (False, reason)


def test_every_contradiction_is_a_contradiction_and_no_duplicate() -> None:
    for a, b, _ in CONTRADICTIONS:
        assert judge(a, b).kind == "contradiction", (a, b)
        assert not restates(a, b).conflict, (a, b)
