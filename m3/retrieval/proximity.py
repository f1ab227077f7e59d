"""Term proximity: how many pairs of the query's neighbouring words a text holds close together (pure functions).

BM25 and the embedding judge a memory by which words it holds and what it is about as a whole; neither sees
whether "chain" and "cassette" stand side by side or 300 words apart in a long turn. The pairs are the query's
keyword terms (:func:`m3.store.fulltext.query_terms`: stop-words dropped, in order) taken two by two as they
follow each other; a pair counts when both words occur within ``window`` words of each other in the text, in
either order. Words are compared by their first :data:`KEY_LENGTH` characters (``"applied"`` and
``"application"`` differ, ``"photograph"`` and ``"photography"`` do not): a crude stem, the same on both stores
and for every language the word pattern reads. Measurements behind the window and the weight: docs/search.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

#: Characters of a word compared (a crude stem).
KEY_LENGTH = 6
_WORD = re.compile(r"\w+", re.UNICODE)


def key(word: str) -> str:
    """The form a word is compared in: lower case, cut to :data:`KEY_LENGTH` characters."""
    return word.lower()[:KEY_LENGTH]


def pairs(terms: Sequence[str]) -> list[tuple[str, str]]:
    """The distinct pairs of neighbouring ``terms`` (keys, in query order); none for fewer than two terms.

    A pair of two words with the same key (``"run"``, ``"runs"``) is left out: one word satisfies it."""
    keys = [key(t) for t in terms]
    return list(dict.fromkeys((a, b) for a, b in pairwise(keys) if a != b))


def closeness(text: str | None, wanted: Sequence[tuple[str, str]], window: int) -> float:
    """The share of ``wanted`` pairs whose two words occur within ``window`` words of each other in ``text``
    (0..1; 0 without pairs or text). Words are the ``\\w+`` runs of the text in lower case."""
    if not wanted or not text:
        return 0.0
    lowered = text.lower()
    # A key that is not a word (never one of query_terms') matches no word.
    places = {k: _places(lowered, k) for k in {k for pair in wanted for k in pair} if _WORD.fullmatch(k)}
    held = sum(1 for a, b in wanted if places.get(a) and places.get(b)
               and _within(lowered, places[a], places[b], window))
    return held / len(wanted)


def _places(text: str, k: str) -> list[tuple[int, int]]:
    """Start and end of each word of ``text`` whose key is the word ``k``, in order.

    Found with ``str.find`` (a scan in C): a regular expression over every word of a text of ~1,000 characters
    cost ~0.1 ms, for each of the texts a search reads."""
    found: list[tuple[int, int]] = []
    at = text.find(k)
    while at >= 0:
        if at == 0 or not _WORD.match(text, at - 1):
            end = at + len(k)
            if len(k) >= KEY_LENGTH:
                found.append((at, _WORD.match(text, at).end()))  # type: ignore[union-attr]  # k is a word
            elif end == len(text) or not _WORD.match(text, end):
                found.append((at, end))
        at = text.find(k, at + 1)
    return found


def _within(text: str, first: list[tuple[int, int]], second: list[tuple[int, int]], window: int) -> bool:
    """Whether a word of ``first`` and one of ``second`` are at most ``window`` words apart.

    A word's place only grows with its offset, so the nearest two are next to each other in offset order."""
    marked = sorted([(start, end, 0) for start, end in first] + [(start, end, 1) for start, end in second])
    return any(a[2] != b[2] and _apart(text, a[1], b[0], window) <= window for a, b in pairwise(marked))


def _apart(text: str, end: int, start: int, window: int) -> int:
    """How many words apart the word ending at ``end`` and the one starting at ``start`` are, counting no further
    than ``window + 1``."""
    apart = 1
    for _ in _WORD.finditer(text, end, start):
        apart += 1
        if apart > window:
            break
    return apart
