"""Do two texts agree on their anchors? A deterministic check, pure functions only.

Anchors make a note *this* fact rather than a neighbouring one (``Customer 4411 ordered 3 laptops``,
``Customer 4412 ordered 3 laptops``): numbers, currency signs and codes, dates and times, identifiers
(``ABC-123``, ``v2.1``, e-mails, URLs, anything mixing letters and digits), capitalised names and quoted
strings. :func:`compare` compares multisets per kind, so order does not matter but counts do: numbers by
value (``1,200.50`` equals ``1200.5``), names and quoted strings case-insensitively, dates and times as
written. A capitalised word opening a sentence is a name only when it is not a common opener and the
pair never uses it in lower case ("Customer" opening one note, "customer" inside the other).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")

# Order matters: earlier patterns claim their span first, so "2026-11-02" is a date, not three numbers.
# Every pattern either starts only where a token starts or is bounded, so scanning stays linear in the
# text's length (an unanchored ``[\w.]+@`` took minutes on 100,000 letters).
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("quoted", r'"([^"\n]{1,200})"|\u201c([^\u201d\n]{1,200})\u201d|(?<![\w\'])\'([^\'\n]{1,200})\'(?![\w])'),
    ("id", r"https?://[^\s<>\"']+[^\s<>\"'.,;:!?)]|(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}"),
    ("date", r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?\b"
             r"|\b\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}\b"),
    ("time", r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[ap]\.?m\.?)?(?![\w:])|\b\d{1,2}\s?[ap]\.?m\.?(?!\w)"),
    ("id", r"(?<![\w.-])(?=[\w.-]{0,200}?\d)(?=[\w.-]{0,200}?[A-Za-z])[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*\b"),
    ("number", r"(?<![\w.])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\w)|(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w])"
               r"|(?<![\w.])[-+]?\.\d+(?![\w])"),
    ("currency", r"[$\u20ac\u00a3\u00a5\u20b9]|\b(?:USD|EUR|GBP|JPY|CHF|CNY|INR|CAD|AUD)\b"),
    ("name", r"\b[A-Z][\w'\u2019-]*"),
)
_SCANNER = re.compile("|".join(f"(?P<k{i}>{p})" for i, (_, p) in enumerate(_PATTERNS)))
_KINDS = tuple(kind for kind, _ in _PATTERNS)
_OPENS_SENTENCE = frozenset(".!?:;\n-*\u2022\"'(\u201c")
_CAPITALISED = re.compile(r"\b[A-Z][\w'\u2019-]*")
_LOWER_WORDS = re.compile(r"\b[a-z][\w'\u2019-]*")
_MONTH_NAME = re.compile(rf"(?:{_MONTHS})\.?", re.IGNORECASE)

#: Capitalised words that open sentences without naming anything.
_OPENERS = """
a an the i i'm i've i'd i'll we we're we've he she it it's they they're you you're my our his her its their your
this that these those there here what which who whom whose when where why how if then so but and or also
on in at for to from by with after before during since until as of about over under into onto yesterday today
tomorrow now currently recently just please note remember always never not no yes every each all some any
oh ah well okay ok hey hi hello thanks thank sure actually speaking anyway besides btw
"""
COMMON_OPENERS = frozenset(_OPENERS.split())


@dataclass(frozen=True)
class Agreement:
    """Whether two texts agree on their anchors; if not, what differs, per kind (only in a, only in b)."""

    agree: bool
    differences: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]

    def reason(self) -> str:
        """One line naming the anchors that differ, e.g. ``number: 4411 vs 4412``; empty when they agree."""
        return "; ".join(f"{kind}: {', '.join(only_a) or '-'} vs {', '.join(only_b) or '-'}"
                         for kind, (only_a, only_b) in sorted(self.differences.items()))


def compare(a: str, b: str) -> Agreement:
    """Compare the anchors of ``a`` and ``b``. Symmetric; a text always agrees with itself."""
    lower = lower_words(a, b)
    found_a, found_b = anchors(a, lower), anchors(b, lower)
    differences: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for kind in dict.fromkeys(_KINDS):
        ca, cb = found_a.get(kind, Counter()), found_b.get(kind, Counter())
        if ca != cb:
            differences[kind] = (tuple(sorted((ca - cb).elements())), tuple(sorted((cb - ca).elements())))
    return Agreement(agree=not differences, differences=differences)


def lower_words(*texts: str) -> set[str]:
    """Words the texts use in lower case and never capitalised inside a sentence: a sentence-initial
    capitalised one of these is no name ("Customer" opening a note that says "customer" elsewhere)."""
    lower = {word for text in texts for word in _LOWER_WORDS.findall(text)}
    inside = {m.group(0).casefold() for text in texts for m in _CAPITALISED.finditer(text)
              if not opens_sentence(text, m.start())}
    return lower - inside


def anchors(text: str, lowered: set[str] | frozenset[str] = frozenset()) -> dict[str, Counter[str]]:
    """The anchors of ``text``, per kind, normalised; ``lowered`` are words seen in lower case
    (a sentence-initial capitalised word in that set is not a name)."""
    found: dict[str, Counter[str]] = {}
    for span in spans(text, lowered):
        found.setdefault(span.kind, Counter())[span.value] += 1
    return found


@dataclass(frozen=True)
class Span:
    """One anchor: its kind, normalised value and where it stands in the text."""

    kind: str
    value: str
    start: int
    end: int


def spans(text: str, lowered: set[str] | frozenset[str] = frozenset()) -> list[Span]:
    """Every anchor of ``text`` in order (see :func:`anchors`)."""
    out: list[Span] = []
    for match in _SCANNER.finditer(text):
        index = int(match.lastgroup[1:]) if match.lastgroup else 0
        kind = _KINDS[index]
        value = _normalise(kind, match)
        if value is None:
            continue
        if kind == "name" and not _is_name(text, match, lowered):
            continue
        if kind == "name" and _MONTH_NAME.fullmatch(value):
            kind = "date"
        out.append(Span(kind, value, match.start(), match.end()))
    return out


def _normalise(kind: str, match: re.Match[str]) -> str | None:
    raw = match.group(0)
    if kind == "quoted":
        inner = next(g for g in match.groups()[1:4] if g is not None) if match.groups() else raw
        text = " ".join(inner.split()).casefold()
        return text or None
    if kind == "number":
        return _number(raw)
    if kind in ("name", "id"):
        return raw.casefold()
    if kind == "currency":
        return raw.upper()
    return " ".join(raw.split()).casefold()


def _number(raw: str) -> str:
    """Canonical decimal text: ``1,200.50`` and ``1200.5`` are one value; ``+3`` is ``3``, ``007`` is ``7``."""
    text = raw.replace(",", "")
    sign = "-" if text.startswith("-") else ""
    whole, _, fraction = text.lstrip("+-").partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    if whole == "0" and not fraction:
        sign = ""
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"


def opens_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence (only spaces and tabs after a sentence mark, or nothing,
    before it)."""
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _OPENS_SENTENCE


def _is_name(text: str, match: re.Match[str], lowered: set[str] | frozenset[str]) -> bool:
    folded = match.group(0).casefold()
    if folded in ("i", "i'm", "i've", "i'd", "i'll"):
        return False
    if not opens_sentence(text, match.start()):
        return True
    # A sentence opener: capitalised by grammar, a name only when nothing says it is an ordinary word.
    return folded not in COMMON_OPENERS and folded not in lowered
