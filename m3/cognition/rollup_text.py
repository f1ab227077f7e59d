"""The text of a roll-up belief: an extractive summary by default, or a chat model's, strictly checked.

Extractive (no model, deterministic): only the sources' own sentences, those of the most central source first,
each sentence once (a sentence whose content words an earlier one already holds is left out), cut at a
sentence boundary before ``max_chars``. Nothing is invented; the title names the content words most of the
sources share. With a model, :func:`model_prompt` asks for JSON and :func:`parse_model_summary` accepts only a
non-empty summary within the bounds (else the caller falls back to the extractive text).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)
#: Function words that never name what notes share (English; other languages' words all count).
_STOP = frozenset(str.split("""
a an and are as at be been but by can did do does for from had has have he her his i if in into is it its me my
not of on or our she so than that the their them then there these they this those to too us was we were what
when where which while who will with would you your also just about after again all any before both each more
most no only other over same some such very should could may might must shall now today yesterday tomorrow
"""))
#: How many shared words the title names.
TITLE_WORDS = 3
#: Longest title (characters).
MAX_TITLE = 200

MODEL_SYSTEM = (
    "You merge related notes of one person into one short belief. Use only what the notes say: no new facts, "
    "no advice. Keep names, numbers and dates exactly as written. Answer with JSON: "
    '{"title": "<a few words naming what the notes share>", "summary": "<the belief, at most N characters>"}.'
)
MODEL_SCHEMA = '{"title": string, "summary": string}'


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split after . ! ? ; and at line breaks), stripped, empty ones dropped."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` that carry content (not function words, longer than two letters)."""
    return [w for w in (t.lower() for t in _WORD.findall(text)) if len(w) > 2 and w not in _STOP]


def extractive_summary(texts: Sequence[str], max_chars: int) -> str:
    """The sentences of ``texts`` (most central source first), each new one on its own line, within ``max_chars``.

    A sentence is left out when its content words are all in the sentences chosen before it (a repetition).
    The first sentence is always kept, cut at a word boundary if it alone is longer than ``max_chars``."""
    chosen: list[str] = []
    covered: set[str] = set()
    size = 0
    for text in texts:
        for sentence in sentences(text):
            words = set(content_words(sentence))
            if chosen and (words <= covered or sentence in chosen):
                continue
            extra = len(sentence) + (1 if chosen else 0)
            if size + extra > max_chars:
                if not chosen:
                    return _cut(sentence, max_chars)
                continue  # a shorter sentence further on may still fit
            chosen.append(sentence)
            covered |= words
            size += extra
    return "\n".join(chosen)


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    return head.rsplit(" ", 1)[0] if " " in head else head


def shared_words(texts: Sequence[str], n: int = TITLE_WORDS) -> list[str]:
    """Up to ``n`` content words found in at least half of ``texts`` (and in two or more), the most widely
    shared first (ties: the first seen), each as first written."""
    first_form: dict[str, str] = {}
    order: dict[str, int] = {}
    counts: Counter[str] = Counter()
    for text in texts:
        seen: set[str] = set()
        for token in _WORD.findall(text):
            word = token.lower()
            if len(word) <= 2 or word in _STOP or word in seen:
                continue
            seen.add(word)
            first_form.setdefault(word, token)
            order.setdefault(word, len(order))
        counts.update(seen)
    needed = max(2, (len(texts) + 1) // 2)
    ranked = sorted((w for w, c in counts.items() if c >= needed), key=lambda w: (-counts[w], order[w]))
    return [first_form[w] for w in ranked[:n]]


def title_for(texts: Sequence[str], titles: Sequence[str | None]) -> str:
    """A title naming what ``texts`` share; without shared words, the most central source's own title or the
    start of its first sentence."""
    words = shared_words(texts)
    if words:
        title = f"{', '.join(words)} ({len(texts)} notes)"
    else:
        own = next((t for t in titles if t), None)
        title = own or _cut(sentences(texts[0])[0] if sentences(texts[0]) else texts[0], 80)
    return _cut(title, MAX_TITLE)


def model_prompt(texts: Sequence[str], max_chars: int) -> tuple[str, str]:
    """(system, user) messages asking a chat model for the belief of ``texts`` (most central first)."""
    notes = "\n".join(f"{i}. {' '.join(text.split())}" for i, text in enumerate(texts, 1))
    return MODEL_SYSTEM.replace("N characters", f"{max_chars} characters"), f"Notes:\n{notes}"


def parse_model_summary(answer: Any, max_chars: int) -> tuple[str | None, str] | None:
    """(title or None, summary) from a model's parsed JSON answer, or None when it is not usable: not an object,
    no summary, an empty or blank one, or one longer than ``max_chars``. A title that is not a short non-empty
    string is dropped (the caller names the cluster itself)."""
    if not isinstance(answer, dict):
        return None
    summary = answer.get("summary")
    if not isinstance(summary, str):
        return None
    summary = summary.strip()
    if not summary or len(summary) > max_chars:
        return None
    title = answer.get("title")
    if not isinstance(title, str) or not title.strip() or len(title.strip()) > MAX_TITLE:
        return None, summary
    return " ".join(title.split()), summary
