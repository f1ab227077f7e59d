"""Do two similar notes contradict each other? The Reflector's deterministic rule, pure functions only.

Two notes of one owner that are already known to be similar (the caller checked their cosine) are a
*contradiction candidate* when they disagree on

* a **negation**: one says what the other denies ("I do eat meat" / "I don't eat meat"),
* a **number**, an **amount**, a **date** or a **time**: both give one and the values differ
  ("added 17 postcards" / "added 25 postcards"; a value only one of them mentions is extra detail, not a
  disagreement),
* the **value of one attribute**: "my X is A" / "my X is B",

while agreeing on what identifies the subject. A pair whose identifiers or proper names differ on both sides
("Customer 4411 ordered 3 laptops" / "Customer 4412 ordered 3 laptops") is two things, not one thing said
twice, so it is no conflict -- except a **name** in two first-person notes that share most of their words:
there the owner is the subject and the name the value that changed ("my recent trip to Hawaii" / "my recent
trip to Paris"; "Premier Silver status" / "Premier Gold status"). A number that labels something is an
identifier, not a quantity: one right after a labelling noun ("customer", "room", "order", "#") or after a
capitalised word that is not a sentence opener ("Employee 4400"), with no decimals. A full calendar date (with
its year: ``2026-11-02``, ``2/11/2026``) dates an occasion, so two notes dated differently are two occasions
(a reading a day, an order a day), not a conflict; a weekday, a month name or a time of day is a value ("class
on Thursday" / "class on Fridays"). Ordinals and a few number words count as numbers ("5th", "three",
"twice").

Apart from contradictions, :func:`restates` says when two similar notes are the same fact in other words (a
``duplicate``): every anchor agrees, and there is at least one.

The anchors themselves (numbers, dates, identifiers, names ...) are those of :mod:`m3.retrieval.anchors`,
so the Reflector and similarity supersession never disagree on what makes two notes different facts.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from m3.retrieval.anchors import COMMON_OPENERS, Span, compare, lower_words, opens_sentence, spans

#: Nouns after which a bare integer names something rather than counts it ("room 12", "customer 4411").
_LABEL_NOUNS = """
customer client employee user account order invoice ticket case issue bug item sku part product unit room
suite apartment flat building floor gate platform seat table desk locker lane route bus line train flight
shipment parcel package batch lot contract policy project task job build release pr patch step chapter page
section figure exhibit id no number # ext extension store branch site ward bed patient member
"""
LABEL_NOUNS = frozenset(_LABEL_NOUNS.split())
#: Kinds whose differing values make a pair two different subjects.
SUBJECT_KINDS = ("id", "name", "quoted", "occasion")
#: Kinds whose differing values are a disagreement about one subject; named as the reason says them.
VALUE_KINDS = {"number": "number", "amount": "amount", "date": "date", "time": "time"}
_COUNTS = ("zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
           "seventeen eighteen nineteen twenty")
# "one" is left out: it is a pronoun too often ("new ones").
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(_COUNTS.split()) if w != "_"}
_NUMBER_WORDS.update({"single": "1", "once": "1", "twice": "2", "thrice": "3"})
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
_ORDINAL = re.compile(r"(?<![\w.])(\d{1,6})(?:st|nd|rd|th)\b", re.IGNORECASE)
_WEEKDAY = re.compile(r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?", re.IGNORECASE)
_FULL_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4}")
_NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|nobody|neither|nor|without|cannot)\b|n[\u2019']t\b",
                       re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z'\u2019]*")
_ATTRIBUTE = re.compile(
    r"\b(?:my|our|his|her|their|the)\s+((?:[a-z][\w-]*\s+){0,3}?[a-z][\w-]*)\s+(?:is|are|was|were)\s+(?:now\s+)?"
    r"([^.,;!?\n]{1,60})", re.IGNORECASE)
_FILLER_WORDS = """
a an the i me my we our you your he she it its they their this that these those is are was were be been am do
does did have has had to of in on at for with and or but so just also really very now still then
"""
_FILLER = frozenset(_FILLER_WORDS.split())
# "I" only capitalised (a lone "i" is rarely the speaker); the rest in any case, but "US" is a country.
_FIRST_PERSON = re.compile(r"\bI(?:['\u2019](?:m|ve|d|ll))?\b|\b(?i:me|my|mine|myself|we|our|ours)\b|\bus\b")
#: Fewest anchors two notes must share, all agreeing, to be called a duplicate (:func:`restates`).
DUPLICATE_MIN_ANCHORS = 1
#: How much of the smaller note's vocabulary the other must share for a changed name to be a changed value.
NAME_OVERLAP = 0.5
#: Words before a changed name that must be the same in both notes for it to stand in the same place.
SLOT_WORDS = 2
_SLOT_WORD = re.compile(r"[\w'\u2019-]+")
#: How much of the smaller note's vocabulary the other must share for a negation to be about the same thing.
NEGATION_OVERLAP = 0.5


@dataclass(frozen=True)
class Verdict:
    """Whether a pair contradicts, why (``number: 17 vs 25``) and the differing values per kind."""

    conflict: bool
    reason: str
    differences: dict[str, list[list[str]]] = field(default_factory=dict)
    #: Who decided: ``rule`` or ``model``.
    by: str = "rule"
    #: What a flagged pair is recorded as: ``contradiction``, or ``duplicate`` (:func:`restates`).
    kind: str = "contradiction"


def judge(a: str, b: str) -> Verdict:
    """The rule's verdict on two similar notes (symmetric up to the order of the values in the reason)."""
    lowered = lower_words(a, b)
    found_a, found_b = _anchors(a, lowered), _anchors(b, lowered)
    subject = _substituted(found_a, found_b, SUBJECT_KINDS)
    renamed = bool(subject) and _renamed_value(a, b, subject, lowered)
    if subject and not renamed:
        return Verdict(False, "different subject: " + _describe(subject), _as_lists(subject))
    values = {**subject, **_substituted(found_a, found_b, tuple(VALUE_KINDS))}
    if values:
        return Verdict(True, _describe(values), _as_lists(values))
    attribute = _attribute_change(a, b)
    if attribute is not None:
        name, old, new = attribute
        return Verdict(True, f"attribute {name}: {old} vs {new}", {"attribute": [[f"{name}={old}"], [f"{name}={new}"]]})
    if _negated(a) != _negated(b) and _overlap(a, b) >= NEGATION_OVERLAP:
        said, denied = (a, b) if not _negated(a) else (b, a)
        return Verdict(True, "negation: one note denies what the other says", {"negation": [[said], [denied]]})
    return Verdict(False, "no disagreement found")


def restates(a: str, b: str, min_anchors: int = DUPLICATE_MIN_ANCHORS) -> Verdict:
    """Whether ``b`` says ``a``'s fact again in other words: the two agree on every anchor
    (:func:`m3.retrieval.anchors.compare`: no number, date, identifier, name or quoted string only on one side)
    and hold at least ``min_anchors`` of them, which pin the fact ("Sensor S-120 in Berlin read 1200.00 kPa on
    2026-09-01" / "On 2026-09-01 the pressure at sensor S-120 (Berlin) was 1200.00 kPa"), and neither denies what
    the other says. Two notes without anchors (or whose only one is a capitalised word opening a sentence, "Can
    you ...") are never called duplicates: only their similarity would say so, and similar is not the same
    ("ordered keyboards" / "ordered licences"). A ``duplicate`` retires nothing; the caller checks the similarity
    (``loop.reflect.duplicate_similarity``)."""
    lowered = lower_words(a, b)
    found_a = _anchors(a, lowered)
    # Both readings must agree: the shared anchors, and this rule's (number words, labelling numbers).
    if not compare(a, b).agree or found_a != _anchors(b, lowered):
        return Verdict(False, "the anchors differ")
    if _negated(a) != _negated(b):
        return Verdict(False, "one note denies what the other says")
    held = sorted({f"{kind}={value}" for kind, values in found_a.items() for value in values})
    if len(held) < min_anchors or not (_pinned(a, lowered) and _pinned(b, lowered)):
        return Verdict(False, "too few anchors to call it the same fact")
    return Verdict(True, f"duplicate: the same {', '.join(held)} in other words", {"anchors": [held, held]},
                   kind="duplicate")


def _pinned(text: str, lowered: set[str]) -> bool:
    """Whether ``text`` holds an anchor other than a capitalised word opening a sentence: "Can you ..." or
    "Do you ..." is capitalised by grammar, and a pair sharing only that is held together by similarity
    alone."""
    return any(span.kind != "name" or not opens_sentence(text, span.start) for span in spans(text, lowered))


def _anchors(text: str, lowered: set[str]) -> dict[str, Counter[str]]:
    """Anchors per kind, with labelling numbers as identifiers, amounts apart from plain numbers, and number
    words ("three") as numbers."""
    found: dict[str, Counter[str]] = {}
    marks = spans(text, lowered)
    for i, span in enumerate(marks):
        kind = span.kind
        if kind == "currency":
            continue  # the amount it marks carries the value
        value = span.value
        if kind == "number":
            kind = _number_kind(text, span, marks[i - 1] if i else None, marks[i + 1] if i + 1 < len(marks) else None)
        elif kind == "time":
            value = value.replace(".", "")  # "7 p.m." is "7 pm", and the full stop after "pm." ends a sentence
        elif kind == "date" and _FULL_DATE.match(value):
            kind = "occasion"
        elif kind == "name" and _WEEKDAY.fullmatch(value):
            kind, value = "date", _WEEKDAY.fullmatch(value).group(1).casefold()  # type: ignore[union-attr]
        elif kind == "name":
            value = _name_value(value)
        elif kind == "id" and _ORDINAL.fullmatch(value):
            kind, value = "number", str(int(_ORDINAL.fullmatch(value).group(1)))  # type: ignore[union-attr]
        found.setdefault(kind, Counter())[value] += 1
    for match in _NUMBER_WORD.finditer(text):
        found.setdefault("number", Counter())[_NUMBER_WORDS[match.group(1).casefold()]] += 1
    return found


def _number_kind(text: str, span: Span, before: Span | None, after: Span | None) -> str:
    if before is not None and before.kind == "currency" and text[before.end:span.start].strip() == "":
        return "amount"
    if after is not None and after.kind == "currency" and text[span.end:after.start].strip() == "":
        return "amount"
    if "." in span.value:
        return "number"
    previous = text[:span.start].rstrip()
    if previous.endswith("#"):
        return "id"
    words = previous.split()
    if not words:
        return "number"
    word = words[-1].strip("(\"'")
    if word.casefold() in LABEL_NOUNS:
        return "id"
    return "id" if word[:1].isupper() and word.isalpha() and word.casefold() not in COMMON_OPENERS else "number"


def _substituted(a: dict[str, Counter[str]], b: dict[str, Counter[str]],
                 kinds: tuple[str, ...]) -> dict[str, tuple[list[str], list[str]]]:
    """Per kind, the values only in ``a`` and only in ``b`` -- where *both* sides have some: a value given
    instead of another, not a detail only one note mentions."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for kind in kinds:
        ca, cb = a.get(kind, Counter()), b.get(kind, Counter())
        only_a, only_b = sorted((ca - cb).elements()), sorted((cb - ca).elements())
        if only_a and only_b:
            out[kind] = (only_a, only_b)
    return out


def _describe(differences: dict[str, tuple[list[str], list[str]]]) -> str:
    return "; ".join(f"{VALUE_KINDS.get(kind, kind)}: {', '.join(a)} vs {', '.join(b)}"
                     for kind, (a, b) in differences.items())


def _as_lists(differences: dict[str, tuple[list[str], list[str]]]) -> dict[str, list[list[str]]]:
    return {kind: [list(a), list(b)] for kind, (a, b) in differences.items()}


def _renamed_value(a: str, b: str, subject: dict[str, tuple[list[str], list[str]]], lowered: set[str]) -> bool:
    """Whether the names that differ are a value the owner changed rather than another subject: only names
    differ (no identifier, quoted string or dated occasion), both notes speak in the first person -- the
    owner is their subject --, they share most of their words, and each note's differing names stand together
    in the same place: after the same two words ("my recent trip to Hawaii" / "my recent trip to Paris";
    "attractions in Kyoto" / "places in Tokyo" is no such pair)."""
    if set(subject) != {"name"} or not (_first_person(a) and _first_person(b)) or _overlap(a, b) < NAME_OVERLAP:
        return False
    only_a, only_b = subject["name"]
    slot_a, slot_b = _name_slot(a, lowered, set(only_a)), _name_slot(b, lowered, set(only_b))
    return slot_a is not None and slot_a == slot_b


def _name_slot(text: str, lowered: set[str], changed: set[str]) -> tuple[str, ...] | None:
    """The two words before ``text``'s ``changed`` names when those form one run (nothing but spaces between
    them), casefolded; None when they do not, or fewer than two words precede them."""
    marks = [s for s in spans(text, lowered) if s.kind == "name" and _name_value(s.value) in changed]
    if not marks or any(text[x.end:y.start].strip() for x, y in pairwise(marks)):
        return None
    before = _SLOT_WORD.findall(text[:marks[0].start])[-SLOT_WORDS:]
    return tuple(w.casefold() for w in before) if len(before) == SLOT_WORDS else None


def _name_value(value: str) -> str:
    """A name as :func:`_anchors` keeps it: "Rachel's" names Rachel."""
    return re.sub(r"['\u2019]s$", "", value)


def _first_person(text: str) -> bool:
    return _FIRST_PERSON.search(text) is not None


def _attribute_change(a: str, b: str) -> tuple[str, str, str] | None:
    """The first attribute both notes give ("my X is ...") with different values: (X, value in a, value in b)."""
    values_b = {_norm(m.group(1)): _norm(m.group(2)) for m in _ATTRIBUTE.finditer(b)}
    for match in _ATTRIBUTE.finditer(a):
        name, value = _norm(match.group(1)), _norm(match.group(2))
        other = values_b.get(name)
        if other is not None and other != value and _negated(value) == _negated(other):
            return name, value, other
    return None


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _negated(text: str) -> bool:
    """Whether ``text`` denies something; an odd number of negations denies, "not ... not" affirms."""
    return len(_NEGATION.findall(text)) % 2 == 1


def _content_words(text: str) -> set[str]:
    words = {w.rstrip("'\u2019s") or w for w in _WORD.findall(text.casefold())}
    return {w for w in words if w not in _FILLER and not _NEGATION.fullmatch(w) and not w.endswith(("n't", "n\u2019t"))}


def _overlap(a: str, b: str) -> float:
    """Shared content words over the smaller note's content words."""
    wa, wb = _content_words(a), _content_words(b)
    smaller = min(len(wa), len(wb))
    return len(wa & wb) / smaller if smaller else 0.0


def describe_for_model(verdict: Verdict) -> dict[str, Any]:
    """What the rule found, in the form the model's prompt shows it."""
    return {"rule_says_conflict": verdict.conflict, "rule_reason": verdict.reason}
