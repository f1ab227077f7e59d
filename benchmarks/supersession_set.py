"""The labelled set of the supersession benchmark: pairs (old note, new note), each a true update or two
distinct facts. Built from the public data where it lies (nothing copied) and from templates.

* ``update_said`` (true update): every LongMemEval knowledge-update question whose evidence spans two
  sessions gives one pair -- the user's earlier and later statement of the fact, each cut down to the
  sentence that carries it (of the two evidence turns' sentences, the pair of highest cosine that are not
  the same sentence), in the
  user's own words: "I've added 17 new ones since I started collecting again" ... "I just realized I've
  added 25 new postcards to my collection since I started collecting again."
* ``update_restated`` (true update): the earlier sentence again, with the anchors that changed replaced
  by the later sentence's values ("… added 25 new ones …"): the same fact re-recorded by an agent in the
  same words with its new value. Pairs whose changed value has no anchor (a number written as a word)
  cannot be restated and are left out.
* ``restatement`` (true update): a templated note and the same fact reworded, every anchor kept.
* ``distinct`` (distinct facts): templated notes that differ only in numbers, names, dates, amounts or
  identifiers ("Customer 4411 ordered 3 laptops on 2026-11-02." / "Customer 4412 …").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from benchmarks.data import LME_FILES, lme_date, read_json
from m3.retrieval.anchors import compare, lower_words, spans

Embed = Callable[[Sequence[str]], npt.NDArray[np.float32]]
UPDATE, DISTINCT = "update", "distinct"
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class Pair:
    group: str
    label: str
    source: str
    old: str
    new: str


def sentences(text: str) -> list[str]:
    """Sentences of a turn worth a note (at least four words)."""
    return [s.strip() for s in _SENTENCE.split(text) if len(s.split()) >= 4]


def evidence_turns(entry: dict[str, object]) -> list[str]:
    """The user turns marked ``has_answer``, one per evidence session, in session-date order."""
    sessions = sorted(zip(entry["haystack_dates"], entry["haystack_sessions"], strict=True),  # type: ignore[call-overload]
                      key=lambda ds: lme_date(ds[0]))
    out = []
    for _date, turns in sessions:
        said = [t["content"] for t in turns if t.get("has_answer") and t["role"] == "user"]
        if said:
            out.append(said[0])
    return out


def knowledge_updates(data_dir: Path, embed: Embed) -> list[Pair]:
    """``update_said`` pairs from the LongMemEval oracle file's knowledge-update questions."""
    pairs = []
    for entry in read_json(data_dir / LME_FILES["oracle"]):
        if entry["question_type"] != "knowledge-update":
            continue
        turns = evidence_turns(entry)
        if len(turns) < 2:
            continue
        first, last = sentences(turns[0]), sentences(turns[-1])
        if not first or not last:
            continue
        sims = embed(first) @ embed(last).T
        for i, a in enumerate(first):  # a sentence said both times is not the fact that changed
            for j, b in enumerate(last):
                if a == b:
                    sims[i, j] = -1.0
        best, other = np.unravel_index(int(np.argmax(sims)), sims.shape)
        pairs.append(Pair("update_said", UPDATE, entry["question_id"], first[int(best)], last[int(other)]))
    return pairs


def restated(pair: Pair) -> Pair | None:
    """``pair.old`` with the anchors that changed set to ``pair.new``'s values; None when nothing could be."""
    lower = lower_words(pair.old, pair.new)
    differences = compare(pair.old, pair.new).differences
    new_spans = spans(pair.new, lower)
    replace: list[tuple[int, int, str]] = []
    for kind, (only_old, only_new) in differences.items():
        olds = [s for s in spans(pair.old, lower) if s.kind == kind and s.value in only_old]
        news = [s for s in new_spans if s.kind == kind and s.value in only_new]
        if len(olds) != len(news):
            continue  # no one-to-one change of value to carry over
        for old_span, new_span in zip(olds, news, strict=True):
            replace.append((old_span.start, old_span.end, pair.new[new_span.start:new_span.end]))
    if not replace:
        return None
    text = pair.old
    for start, end, value in sorted(replace, reverse=True):
        text = text[:start] + value + text[end:]
    return Pair("update_restated", UPDATE, pair.source, pair.old, text) if text != pair.old else None


# -- templated notes -----------------------------------------------------------------------------

NAMES = ("Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Julia", "Kofi", "Lena")
CITIES = ("Berlin", "Munich", "Lisbon", "Osaka", "Denver", "Nairobi", "Quito", "Oslo", "Perth", "Lyon")
PRODUCTS = ("laptops", "monitors", "keyboards", "licences", "chairs")

#: (name, note, the same note reworded) with slots filled from one instance number.
TEMPLATES: tuple[tuple[str, str, str], ...] = (
    ("order", "Customer {id4} ordered {small} {product} on 2026-11-{day:02d}.",
     "On 2026-11-{day:02d}, customer {id4} placed an order for {small} {product}."),
    ("invoice", "Invoice INV-{id4} for ${amount}.{cents:02d} is due on 2026-12-{day:02d}.",
     "The due date of invoice INV-{id4} (${amount}.{cents:02d}) is 2026-12-{day:02d}."),
    ("ticket", "Ticket OPS-{id3} was assigned to {name} with priority {small}.",
     "{name} now owns ticket OPS-{id3}, priority {small}."),
    ("meeting", "The review with {name} is on 2026-11-{day:02d} at {hour}:30 in room {id3}.",
     "On 2026-11-{day:02d} at {hour}:30 the review with {name} takes place in room {id3}."),
    ("contact", "{name} can be reached at {lower}@example.com about the {city} office.",
     "For the {city} office, contact {name} at {lower}@example.com."),
    ("shipment", "Shipment {id4} of {small} {product} left {city} on 2026-10-{day:02d}.",
     "On 2026-10-{day:02d} shipment {id4} with {small} {product} departed from {city}."),
    ("salary", "Employee {id4} in {city} earns {amount} EUR a month.",
     "The monthly salary of employee {id4} ({city}) is {amount} EUR."),
    ("version", "Service {lower}-api runs version {small}.{day} on {hour} nodes.",
     "Version {small}.{day} of service {lower}-api is deployed on {hour} nodes."),
    ("flight", "Flight LH{id3} to {city} departs at {hour}:45 from gate {small}.",
     "Gate {small} serves flight LH{id3} to {city}, departing {hour}:45."),
    ("reading", "Sensor S-{id3} in {city} read {amount}.{cents:02d} kPa on 2026-09-{day:02d}.",
     "On 2026-09-{day:02d} the pressure at sensor S-{id3} ({city}) was {amount}.{cents:02d} kPa."),
)


def slots(n: int) -> dict[str, object]:
    name = NAMES[n % len(NAMES)]
    return {"id4": 4400 + 7 * n, "id3": 120 + 3 * n, "small": 2 + n % 6, "day": 1 + (5 * n) % 28,
            "amount": 1200 + 35 * n, "cents": (17 * n) % 100, "hour": 8 + n % 9, "name": name,
            "lower": name.lower(), "city": CITIES[(3 * n) % len(CITIES)], "product": PRODUCTS[n % len(PRODUCTS)]}


def _slot_keys(template: str) -> list[str]:
    """The anchor slots a template uses (``lower`` travels with ``name``)."""
    keys = list(dict.fromkeys(re.findall(r"{(\w+)", template)))
    return [k for k in keys if k not in ("lower", "product")]  # a product is a common noun, not an anchor


def varied(n: int, key: str) -> dict[str, object]:
    """Instance ``n``'s slots with one slot (``key``) taken from another instance: a neighbouring fact."""
    values, other = slots(n), slots(n + 1)
    values[key] = other[key]
    if key == "name":
        values["lower"] = other["lower"]
    return values


def templated(instances: int) -> list[Pair]:
    """For each template and instance: a distinct pair (the note, and the note with one slot changed, the
    slots taken in turn) and a restatement (the note, and the same fact reworded)."""
    pairs = []
    for name, note, reworded in TEMPLATES:
        keys = _slot_keys(note)
        for n in range(instances):
            key = keys[n % len(keys)]
            pairs.append(Pair("distinct", DISTINCT, f"{name}:{key}", note.format(**slots(n)),
                              note.format(**varied(n, key))))
            pairs.append(Pair("restatement", UPDATE, name, note.format(**slots(n)), reworded.format(**slots(n))))
    return pairs


def labelled_set(data_dir: Path, embed: Embed, instances: int = 10) -> list[Pair]:
    said = knowledge_updates(data_dir, embed)
    restatements = [r for r in (restated(p) for p in said) if r is not None]
    return said + restatements + templated(instances)
