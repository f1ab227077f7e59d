"""Deterministic entity extraction: the same text always gives the same mentions and relations.

What is found (docs/entities.md): capitalised names (several words anywhere; one word only where it cannot
merely open a sentence), dates (ISO and written-out, canonically ``YYYY-MM-DD`` or ``YYYY-MM``), amounts of
money (``USD 1200``), quoted titles, e-mail addresses, URLs, the configured types (``entities.types``), and
simple relations between them ("X works at Y", "X moved to Y", "X is my Y", "X is the CEO of Y" ...).

Every pattern is bounded (no unbounded repetition that could backtrack), so a scan is linear in the text;
only the first :data:`MAX_CHARS` characters of a memory are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation

from m3.protocols.messages.entities import normalise

#: Characters of one text that are scanned (the rest of a very long memory is ignored).
MAX_CHARS = 20_000
#: Built-in entity types; configured types add to these.
BUILTIN_TYPES = ("name", "date", "money", "title", "email", "url", "role")

_MONTHS = {name: i + 1 for i, names in enumerate((
    "january jan", "february feb", "march mar", "april apr", "may", "june jun", "july jul", "august aug",
    "september sep sept", "october oct", "november nov", "december dec")) for name in names.split()}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WORD = r"[A-Z][\w'\u2019-]{0,40}"
_PARTICLE = r"(?:of|de|van|von|der|da|di|du|la|le)"
_NAME = rf"{_WORD}(?:[ \t]{{1,3}}(?:{_PARTICLE}[ \t]{{1,3}})?{_WORD}){{0,5}}"

#: Capitalised words that are no name on their own and no part of one at its start or end (openers, pronouns,
#: days, months, verbs that open a request: "Ask Ludwig van Beethoven").
_STOP = frozenset((
    "a", "an", "the", "this", "that", "these", "those", "i", "we", "you", "he", "she", "they", "it", "my", "our",
    "your", "his", "her", "their", "its", "me", "us", "them", "yesterday", "today", "tomorrow", "tonight", "then",
    "when", "if", "in", "on", "at", "after", "before", "also", "but", "and", "or", "so", "please", "note",
    "meanwhile", "however", "there", "here", "what", "who", "why", "how", "where", "which", "while", "since",
    "until", "because", "although", "though", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    "sunday", "hi", "hello", "dear", "thanks", "ok", "yes", "no", "mr", "mrs", "ms", "dr", "ask", "meet", "call",
    "tell", "email", "mail", "ping", "see", "send", "thank", "invite", "remind", "let", "remember",
)) | frozenset(_MONTHS)

_CURRENCY = {"$": "USD", "\u20ac": "EUR", "\u00a3": "GBP", "\u00a5": "JPY", "dollars": "USD", "dollar": "USD",
             "euros": "EUR", "euro": "EUR", "pounds": "GBP", "usd": "USD", "eur": "EUR", "gbp": "GBP",
             "chf": "CHF", "jpy": "JPY", "cad": "CAD", "aud": "AUD", "inr": "INR", "cny": "CNY"}
_SCALE = {"k": 10**3, "thousand": 10**3, "m": 10**6, "mn": 10**6, "million": 10**6, "bn": 10**9,
          "billion": 10**9}
_AMOUNT = r"\d{1,3}(?:,\d{3}){1,5}(?:\.\d{1,4})?|\d{1,15}(?:\.\d{1,4})?"
_SCALES = r"(?:[ \t]?(?P<{g}>k|m|mn|bn|thousand|million|billion)\b)?"
_CODES = r"USD|EUR|GBP|CHF|JPY|CAD|AUD|INR|CNY"

#: (type, pattern, priority): a lower priority claims its span first; equal priorities prefer the longer.
_PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("email", re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}"), 0),
    ("url", re.compile(r"\bhttps?://[^\s<>\"']{1,2000}"), 0),
    ("date", re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b"), 2),
    ("date", re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?[ \t]{{1,3}}(?P<mon>{_MONTH})\.?,?[ \t]{{1,3}}"
                        r"(?P<y>\d{4})\b", re.IGNORECASE), 2),
    ("date", re.compile(rf"\b(?P<mon>{_MONTH})\.?[ \t]{{1,3}}(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?[ \t]{{1,3}}"
                        r"(?P<y>\d{4})\b", re.IGNORECASE), 2),
    ("date", re.compile(rf"\b(?P<mon>{_MONTH})\.?[ \t]{{1,3}}(?P<y>\d{{4}})\b", re.IGNORECASE), 3),
    ("money", re.compile(rf"(?P<cur>[$\u20ac\u00a3\u00a5]|\b(?:{_CODES})\b)[ \t]?(?P<n>{_AMOUNT})"
                         + _SCALES.format(g="s")), 2),
    ("money", re.compile(rf"(?<![\w.,])(?P<n>{_AMOUNT})" + _SCALES.format(g="s")
                         + rf"[ \t]?(?P<cur>\b(?:{_CODES}|dollars?|euros?|pounds)\b)", re.IGNORECASE), 2),
    ("title", re.compile(r'"(?P<t>[^"\n]{1,120})"|\u201c(?P<c>[^\u201d\n]{1,120})\u201d'), 4),
    ("name", re.compile(rf"\b{_NAME}"), 6),
)

#: Relations: a regex whose ``s`` and ``o`` groups are the subject and object; the predicate (a ``p`` group
#: names it from the text, as in "is the CEO of").
_S, _O = rf"(?P<s>{_NAME})", rf"(?P<o>{_NAME})"
_RELATIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("works_at", re.compile(rf"{_S}[ \t]{{1,3}}(?:works|worked|is working|was working)[ \t]{{1,3}}(?:at|for)"
                            rf"[ \t]{{1,3}}{_O}")),
    ("moved_to", re.compile(rf"{_S}[ \t]{{1,3}}(?:has[ \t]{{1,3}})?(?:moved|relocated)[ \t]{{1,3}}to[ \t]{{1,3}}{_O}")),
    ("lives_in", re.compile(rf"{_S}[ \t]{{1,3}}(?:lives|lived|is living)[ \t]{{1,3}}in[ \t]{{1,3}}{_O}")),
    ("joined", re.compile(rf"{_S}[ \t]{{1,3}}(?:has[ \t]{{1,3}})?joined[ \t]{{1,3}}{_O}")),
    ("founded", re.compile(rf"{_S}[ \t]{{1,3}}(?:founded|co-founded|started)[ \t]{{1,3}}{_O}")),
    ("manages", re.compile(rf"{_S}[ \t]{{1,3}}(?:manages|leads|runs)[ \t]{{1,3}}{_O}")),
    ("reports_to", re.compile(rf"{_S}[ \t]{{1,3}}reports[ \t]{{1,3}}to[ \t]{{1,3}}{_O}")),
    ("married_to", re.compile(rf"{_S}[ \t]{{1,3}}(?:is[ \t]{{1,3}})?married[ \t]{{1,3}}(?:to[ \t]{{1,3}})?{_O}")),
    ("role_of", re.compile(rf"{_S}[ \t]{{1,3}}(?:is|was)[ \t]{{1,3}}the[ \t]{{1,3}}"
                           rf"(?P<p>[A-Za-z][\w-]{{0,30}}(?:[ \t][a-z][\w-]{{0,30}}){{0,2}})"
                           rf"[ \t]{{1,3}}of[ \t]{{1,3}}{_O}")),
    ("is_my", re.compile(rf"{_S}[ \t]{{1,3}}is[ \t]{{1,3}}my[ \t]{{1,3}}"
                         rf"(?P<r>[a-z][\w-]{{1,30}}(?:[ \t][a-z][\w-]{{1,30}})?)\b")),
)
#: Per relation, words its pattern cannot match without (one of each group, case as in the pattern): a text that
#: lacks them skips the pattern, which would otherwise try a name at every capital letter of the text.
_NEEDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "works_at": (("work",),), "moved_to": (("moved", "relocated"),), "lives_in": (("liv",),),
    "joined": (("joined",),), "founded": (("founded", "started"),), "manages": (("manages", "leads", "runs"),),
    "reports_to": (("reports",),), "married_to": (("married",),), "role_of": (("the",), ("of",)),
    "is_my": (("my",),),
}
_SENTENCE_END = frozenset(".!?:;\n\"'(\u201c*-\u2022")


@dataclass(frozen=True)
class Mention:
    """One entity named in the text: its canonical name, type and where (``text[start:end]`` is ``surface``)."""

    name: str
    type: str
    start: int
    end: int
    surface: str

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the entity: its type and its normalised name."""
        return self.type, normalise(self.name)


@dataclass(frozen=True)
class Fact:
    """A relation the text states: ``subject predicate object`` (e.g. Alice works_at Acme)."""

    subject: Mention
    predicate: str
    object: Mention


@dataclass(frozen=True)
class Extraction:
    mentions: tuple[Mention, ...]
    relations: tuple[Fact, ...]


def parse_types(entries: Iterable[str]) -> dict[str, re.Pattern[str]]:
    """``entities.types`` entries ``"type=regex"`` compiled; a ValueError names a malformed one."""
    types: dict[str, re.Pattern[str]] = {}
    for entry in entries:
        name, sep, pattern = entry.partition("=")
        name = name.strip().lower()
        if not sep or not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", name) or not pattern:
            raise ValueError(f"{entry!r} is not type=regex (a type of lower-case letters, digits and _)")
        try:
            types[name] = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"the pattern of type {name!r} is no regular expression: {exc}") from None
    return types


class Extractor:
    """Extracts mentions and relations; ``types`` adds configured entity types (type -> compiled regex)."""

    def __init__(self, types: Mapping[str, re.Pattern[str]] | None = None):
        custom = tuple((name, pattern, 1) for name, pattern in (types or {}).items())
        self._patterns = _PATTERNS[:2] + custom + _PATTERNS[2:]

    def extract(self, text: str) -> Extraction:
        text = text[:MAX_CHARS]
        mentions = _claim(list(self._candidates(text)))
        facts, extra = _relations(text, mentions)
        return Extraction(mentions=tuple(sorted(mentions + extra, key=lambda m: m.start)), relations=tuple(facts))

    def _candidates(self, text: str) -> Iterable[tuple[int, Mention]]:
        for kind, pattern, priority in self._patterns:
            for match in pattern.finditer(text):
                mention = _canonical(kind, match, text)
                if mention is not None:
                    yield priority, mention


def _claim(candidates: list[tuple[int, Mention]]) -> list[Mention]:
    """The candidates that keep their span: by priority, then the longer, then the earlier."""
    taken: list[Mention] = []
    for _, m in sorted(candidates, key=lambda pm: (pm[0], pm[1].start - pm[1].end, pm[1].start)):
        if all(m.end <= t.start or m.start >= t.end for t in taken):
            taken.append(m)
    return taken


def _canonical(kind: str, match: re.Match[str], text: str) -> Mention | None:
    start, end = match.span()
    if kind == "date":
        return _date(match, start, end)
    if kind == "money":
        return _money(match, start, end)
    if kind == "title":
        inner = (match.group("t") or match.group("c")).strip()
        if not re.search(r"[^\W\d_]", inner) or len(inner.split()) > 12:
            return None
        return Mention(inner, "title", start, end, match.group())
    if kind == "name":
        return _name(text, start, end)
    if kind == "url":
        end = start + len(match.group().rstrip(".,;:!?)]}'\""))
        return Mention(text[start:end], "url", start, end, text[start:end])
    if kind == "email":
        return Mention(match.group().lower(), "email", start, end, match.group())
    surface = match.group()
    return Mention(surface.strip(), kind, start, end, surface) if surface.strip() else None


def _date(match: re.Match[str], start: int, end: int) -> Mention | None:
    parts = match.groupdict()
    month = int(parts["m"]) if parts.get("m") else _MONTHS[parts["mon"].lower()]
    year = int(parts["y"])
    try:
        if parts.get("d"):
            name = date(year, month, int(parts["d"])).isoformat()
        else:
            name = date(year, month, 1).isoformat()[:7]
    except ValueError:
        return None  # "31 February 2026" is no date
    return Mention(name, "date", start, end, match.group())


def _money(match: re.Match[str], start: int, end: int) -> Mention | None:
    code = _CURRENCY.get(match.group("cur").lower(), match.group("cur").upper())
    try:
        amount = Decimal(match.group("n").replace(",", "")) * _SCALE.get((match.group("s") or "").lower(), 1)
    except InvalidOperation:
        return None
    value = f"{amount.normalize():f}"
    return Mention(f"{code} {value}", "money", start, end, match.group())


def _opens_sentence(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t")
    return not before or before[-1] in _SENTENCE_END


def _name(text: str, start: int, end: int) -> Mention | None:
    """A capitalised run without its leading and trailing stop words; one word only mid-sentence."""
    words = [(w.start() + start, w.end() + start) for w in re.finditer(r"\S+", text[start:end])]
    opening = _opens_sentence(text, start)
    while words and normalise(text[words[0][0]:words[0][1]]) in _STOP:
        words.pop(0)
        opening = False
    while words and normalise(text[words[-1][0]:words[-1][1]]) in _STOP:
        words.pop()
    while words and not text[words[-1][0]].isupper():  # a trailing particle ("Bank of")
        words.pop()
    if not words:
        return None
    s, e = words[0][0], words[-1][1]
    if len(words) == 1 and (opening and s == start):
        return None  # "Deploy the fix." -- a sentence's first word says nothing by its case
    surface = text[s:e].rstrip("'\u2019-")
    return Mention(" ".join(surface.split()), "name", s, s + len(surface), surface)


def _relations(text: str, mentions: list[Mention], needs: Mapping[str, tuple[tuple[str, ...], ...]] = _NEEDS
               ) -> tuple[list[Fact], list[Mention]]:
    """The facts the relation patterns find, and the mentions they add (a sentence-initial one-word name);
    ``needs`` names the words without which a pattern is not tried (``_NEEDS``; the result is the same without)."""
    facts: list[Fact] = []
    extra: list[Mention] = []
    for predicate, pattern in _RELATIONS:
        if not all(any(word in text for word in group) for group in needs.get(predicate, ())):
            continue
        for match in pattern.finditer(text):
            subject = _ending_at(text, match.end("s"), mentions, extra)
            if subject is None:
                continue
            if predicate == "is_my":
                role = match.group("r").lower()
                obj = Mention(role, "role", match.start("r"), match.end("r"), match.group("r"))
                name = predicate
            else:
                found = _starting_at(text, match.start("o"), match.end("o"), mentions, extra)
                if found is None:
                    continue
                obj = found
                name = (f"{'_'.join(match.group('p').lower().split())}_of" if predicate == "role_of" else predicate)
            if obj.key != subject.key:
                facts.append(Fact(subject, name, obj))
                if obj.type == "role" and obj not in extra:
                    extra.append(obj)
    return facts, extra


def _ending_at(text: str, end: int, mentions: list[Mention], extra: list[Mention]) -> Mention | None:
    """The name mention that ends at ``end``, or a new one-word name there (the subject of a relation)."""
    for m in mentions + extra:
        if m.end == end and m.type == "name":
            return m
    word = re.search(rf"{_WORD}$", text[:end])
    if word is None or normalise(word.group()) in _STOP or any(m.start < end and m.end > word.start()
                                                               for m in mentions + extra):
        return None
    made = Mention(word.group(), "name", word.start(), end, word.group())
    extra.append(made)
    return made


def _starting_at(text: str, start: int, end: int, mentions: list[Mention], extra: list[Mention]
                 ) -> Mention | None:
    """The mention (of any type but role) that starts at ``start``, within the matched object."""
    for m in mentions + extra:
        if m.start == start and m.end <= end and m.type != "role":
            return m
    word = re.match(_WORD, text[start:end])
    if word is None or normalise(word.group()) in _STOP:
        return None
    made = Mention(word.group(), "name", start, start + word.end(), word.group())
    for m in [m for m in mentions if m.type == "name" and m.start < made.start < m.end]:
        mentions.remove(m)  # "CEO of Apple" read as one name: the object of "is the CEO of" is Apple
    if any(m.start < made.end and m.end > made.start for m in mentions + extra):
        return None
    extra.append(made)
    return made
