"""A deterministic extractive summary (conversations_summarise): the sentences that best represent the text.

No model: every sentence is scored by how frequent its content words are in the whole conversation
(normalised by the most frequent word), averaged over the square root of its length so that neither one-word
lines nor run-on sentences win; ties go to the earlier sentence. The best ``n`` are shown in the order they were
said. The same turns always give the same summary. docs/conversations.md.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
#: Words that say little about what a conversation is about (English; others count as content words).
STOPWORDS = frozenset(str.split("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
him his how i if in into is it its just me more most my no nor not now of off on once only or other our ours out
over own same she should so some such than that the their them then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your yours yes ok
okay please thanks thank also let lets get got like one two well sure
"""))
#: A sentence needs this many content words to be chosen while longer ones remain.
MIN_WORDS = 3


@dataclass(frozen=True)
class Sentence:
    text: str
    turn: int
    position: int
    score: float


def sentences(turns: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """The sentences of ``turns`` ((turn, text) in order), each with its turn."""
    out = []
    for turn, text in turns:
        out += [(turn, part.strip()) for part in _SENTENCE_END.split(text) if part.strip()]
    return out


def content_words(text: str) -> list[str]:
    return [w for w in (t.lower() for t in _WORD.findall(text)) if len(w) > 2 and w not in STOPWORDS]


def summarise(turns: Sequence[tuple[int, str]], n: int) -> list[Sentence]:
    """The ``n`` most representative sentences of ``turns``, in the order they were said."""
    found = sentences(turns)
    words = [content_words(text) for _, text in found]
    freq = Counter(w for ws in words for w in ws)
    top = max(freq.values(), default=1)
    scored = []
    for position, ((turn, text), ws) in enumerate(zip(found, words, strict=True)):
        score = sum(freq[w] / top for w in ws) / math.sqrt(len(ws)) if ws else 0.0
        scored.append(Sentence(text=text, turn=turn, position=position, score=round(score, 6)))
    # Substantial sentences first; among them the best score, then the earlier one.
    ranked = sorted(scored, key=lambda s: (len(words[s.position]) < MIN_WORDS, -s.score, s.position))
    return sorted(ranked[:n], key=lambda s: s.position)
