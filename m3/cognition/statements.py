"""The Observer's deterministic rules: which sentences of a user's turn state a preference, a fact about
themselves or a decision.

A statement is a sentence in the first person that matches one of the patterns below and is neither a
question ("Do you like jazz?", "What should I cook?") nor a hypothetical ("If I moved to Oslo …", "I would love
…", "Maybe I'll …"). The observation quotes the user's sentence as written (trimmed to :data:`MAX_QUOTE`
characters at a word boundary): the rules never paraphrase, so they never invent. One sentence gives at most one
statement, of the first kind that matches in the order decision, preference, fact.

Every pattern is bounded, so a scan is linear in the text; only the first :data:`MAX_CHARS` characters of a turn
are read.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

#: Characters of one turn that are read.
MAX_CHARS = 20_000
#: The longest quote an observation holds; a longer sentence is cut at a word boundary and ends with "…".
MAX_QUOTE = 300
#: The kinds of statement, and how an observation of each opens.
KINDS = {"preference": "The user stated a preference", "fact": "The user stated a fact about themselves",
         "decision": "The user stated a decision"}

_I = r"\bI(?:[ \t]{1,3}(?:really|truly|absolutely|just|also|actually|generally|usually|definitely|still|do|kind of|"\
     r"sort of|personally)){0,2}[ \t]{1,3}"
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("decision", re.compile(
        r"\b(?:I|we)(?:'ve|[ \t]{1,3}have)?[ \t]{1,3}(?:finally[ \t]{1,3})?(?:decided|chosen|settled on|opted)\b"
        r"|\b(?:I|we)(?:'ll|[ \t]{1,3}will|'re going to|[ \t]{1,3}are going to|'m going to|[ \t]{1,3}am going to)"
        r"[ \t]{1,3}(?:go|stick)[ \t]{1,3}with\b"
        r"|\blet'?s[ \t]{1,3}(?:use|go[ \t]{1,3}with|stick[ \t]{1,3}with|pick|choose|switch[ \t]{1,3}to)\b"
        r"|\b(?:I|we)[ \t]{1,3}(?:chose|picked(?![ \t]{1,3}up)|went[ \t]{1,3}with)\b", re.IGNORECASE)),
    ("preference", re.compile(
        _I + r"(?:prefer|like|love|enjoy|adore|hate|dislike|detest|loathe|can'?t[ \t]{1,3}stand|cannot[ \t]{1,3}stand|"
        r"don'?t[ \t]{1,3}(?:like|enjoy|care[ \t]{1,3}for)|do[ \t]{1,3}not[ \t]{1,3}(?:like|enjoy)|"
        r"am[ \t]{1,3}(?:not[ \t]{1,3})?(?:a[ \t]{1,3})?(?:big[ \t]{1,3}|huge[ \t]{1,3})?fan[ \t]{1,3}of|"
        r"am[ \t]{1,3}into|am[ \t]{1,3}allergic[ \t]{1,3}to)\b"
        r"|\bI'm[ \t]{1,3}(?:not[ \t]{1,3})?(?:a[ \t]{1,3})?(?:big[ \t]{1,3}|huge[ \t]{1,3})?(?:fan[ \t]{1,3}of|into|"
        r"allergic[ \t]{1,3}to)\b"
        r"|\bmy[ \t]{1,3}(?:all-time[ \t]{1,3}|absolute[ \t]{1,3})?fav(?:ou)?rite\b", re.IGNORECASE)),
    ("fact", re.compile(
        r"\bmy[ \t]{1,3}(?P<thing>[a-z][\w'-]{0,30}(?:[ \t]{1,3}[a-z][\w'-]{0,30}){0,2})[ \t]{1,3}(?:is|are|was)\b"
        r"|" + _I + r"(?:live|work|grew[ \t]{1,3}up|was[ \t]{1,3}born|study|studied|teach|worked)[ \t]{1,3}"
        r"(?:in|at|for|as|near)\b"
        r"|\bI(?:'ve|[ \t]{1,3}have)?[ \t]{1,3}(?:just[ \t]{1,3}|recently[ \t]{1,3})?(?:moved|relocated)[ \t]{1,3}to\b"
        r"|\bI[ \t]{1,3}(?:have|own|'ve[ \t]{1,3}got|have[ \t]{1,3}got)[ \t]{1,3}(?:a|an|two|three|four|five|\d{1,3})"
        r"[ \t]{1,3}(?!(?:quick[ \t]{1,3}|few[ \t]{1,3}|couple[ \t]{1,3}of[ \t]{1,3})?questions?\b)[a-z]"
        r"|\bI(?:'m|[ \t]{1,3}am)[ \t]{1,3}(?:a|an)[ \t]{1,3}(?!bit\b|little\b|lot\b|fan\b)[a-z]{3,}", re.IGNORECASE)),
)

#: "my X is" where X names no fact about the user ("my question is", "my guess is").
_NOT_FACTS = frozenset((
    "question", "guess", "point", "pleasure", "bad", "apologies", "understanding", "thought", "thoughts", "concern",
    "issue", "problem", "request", "answer", "idea", "suggestion", "hope", "worry", "fear", "advice", "reply",
    "response", "take", "impression", "assumption", "bet", "mistake", "fault", "turn", "query", "code", "output",
    "error",
))
_HYPOTHETICAL = re.compile(
    r"\b(?:if|unless|suppose|supposing|imagine|hypothetically|whether|wish|wonder(?:ing)?|would|could|might|"
    r"should[ \t]{1,3}I|maybe[ \t]{1,3}I'?ll|perhaps[ \t]{1,3}I'?ll|in[ \t]{1,3}case|were[ \t]{1,3}I|"
    r"pretend|role-?play)\b",
    re.IGNORECASE)
_QUESTION_OPENERS = re.compile(
    r"^(?:do|does|did|can|could|would|will|should|shall|is|are|am|was|were|have|has|what|which|who|whom|whose|"
    r"why|how|where|when|any)\b", re.IGNORECASE)
_REPORTED = re.compile(r"\b(?:you|he|she|they|my[ \t]{1,3}\w+)[ \t]{1,3}(?:said|says|told|thinks?)\b",
                       re.IGNORECASE)
#: A sentence ends at . ! ? or a line break (an abbreviation split is harmless: both halves are checked). The
#: terminator is optional, so a match never fails and backtracks: a text without one is cut every 2,000 chars.
_SENTENCE = re.compile(r"[^.!?\n]{1,2000}[.!?]{0,3}")


@dataclass(frozen=True)
class Statement:
    """One statement found: its kind and the user's words (the quote)."""

    kind: str
    quote: str

    @property
    def content(self) -> str:
        """The observation's text: a standalone sentence quoting the user."""
        return f'{KINDS[self.kind]}: "{self.quote}"'


def sentences(text: str) -> Iterator[str]:
    """The sentences of ``text`` (its first :data:`MAX_CHARS` characters), stripped, empty ones left out."""
    for match in _SENTENCE.finditer(text[:MAX_CHARS]):
        sentence = match.group(0).strip()
        if sentence:
            yield sentence


def classify(sentence: str) -> str | None:
    """The kind of statement ``sentence`` makes, or None (no statement, a question or a hypothetical)."""
    if sentence.rstrip().endswith("?") or _QUESTION_OPENERS.match(sentence) or _HYPOTHETICAL.search(sentence):
        return None
    if _REPORTED.search(sentence):
        return None  # someone else's words reported by the user are not the user's own statement
    for kind, pattern in _RULES:
        for match in pattern.finditer(sentence):
            thing = match.groupdict().get("thing")
            if thing is not None and thing.split()[-1].casefold() in _NOT_FACTS:
                continue
            return kind
    return None


def quote(sentence: str) -> str:
    """``sentence`` as an observation quotes it: inner whitespace collapsed, straight double quotes made single
    (so the quote stays one quoted span), cut to :data:`MAX_QUOTE` characters at a word boundary."""
    text = " ".join(sentence.replace('"', "'").replace("\u201c", "'").replace("\u201d", "'").split())
    if len(text) <= MAX_QUOTE:
        return text
    cut = text[:MAX_QUOTE].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " \u2026"


def statements(text: str) -> list[Statement]:
    """The statements of a user's turn, in order, each sentence at most once."""
    found: list[Statement] = []
    seen: set[str] = set()
    for sentence in sentences(text):
        kind = classify(sentence)
        if kind is None:
            continue
        said = quote(sentence)
        if normalised(said) not in seen:
            seen.add(normalised(said))
            found.append(Statement(kind, said))
    return found


def normalised(text: str) -> str:
    """The form in which two observations are the same: case-folded, punctuation and whitespace ignored."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def observation_key(text: str) -> str:
    """The stable key of an observation's quote (the memory's ``source``, ``observe:<sha-256 prefix>``)."""
    return "observe:" + hashlib.sha256(normalised(text).encode()).hexdigest()[:32]
