"""Loading the benchmark data sets into one shape: haystacks of turns, with questions.

A :class:`Haystack` is what goes into one store: its turns become memories
(one per turn) and its questions are searched against it.

* LongMemEval_S: one haystack per question (its ~50 sessions).
* LongMemEval oracle: one pooled haystack of every question's evidence
  sessions (each session once), searched by every question.
* LoCoMo: one haystack per conversation, searched by its QA items that have
  evidence (category 5, adversarial, is skipped).

Data is read from where it lies (``--data``); nothing is copied.
"""

from __future__ import annotations

import json
import lzma
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LME_FILES = {"s": "longmemeval/longmemeval_s_dev.json.xz", "oracle": "longmemeval/longmemeval_oracle_dev.json"}
LOCOMO_FILE = "locomo/locomo_dev.json"
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Turn:
    """One dialogue turn: becomes one memory."""

    session_id: str
    index: int
    #: Unique within the haystack: ``<session>:<index>`` (LongMemEval) or the ``dia_id`` (LoCoMo).
    key: str
    role: str
    content: str
    date: datetime | None


@dataclass(frozen=True)
class Question:
    qid: str
    qtype: str
    text: str
    gold_sessions: frozenset[str]
    #: Evidence turn keys (LoCoMo); empty for LongMemEval.
    gold_turns: frozenset[str] = frozenset()
    #: When the question is asked: LongMemEval's ``question_date``; for LoCoMo, which gives none, the date of
    #: the conversation's last session (every question is asked after it).
    date: datetime | None = None


@dataclass(frozen=True)
class Haystack:
    name: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def default_data_dir() -> Path:
    """``../shared/data`` relative to the project root."""
    return Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def read_json(path: Path) -> Any:
    if path.suffix == ".xz":
        with lzma.open(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    with path.open(encoding="utf-8") as fh:
        return json.load(fh)


# ---------------------------------------------------------------- LongMemEval


def lme_date(text: str) -> datetime:
    """``2023/05/20 (Sat) 07:47`` as an aware UTC datetime."""
    day, _weekday, clock = text.split(" ")
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def lme_turns(entry: dict[str, Any]) -> Iterator[Turn]:
    """Every turn of one LongMemEval entry's haystack, session by session."""
    for sid, date, session in zip(entry["haystack_session_ids"], entry["haystack_dates"],
                                  entry["haystack_sessions"], strict=True):
        when = lme_date(date)
        for i, turn in enumerate(session):
            yield Turn(session_id=sid, index=i, key=f"{sid}:{i}", role=turn["role"], content=turn["content"],
                       date=when)


def lme_question(entry: dict[str, Any]) -> Question:
    return Question(qid=entry["question_id"], qtype=entry["question_type"], text=entry["question"],
                    gold_sessions=frozenset(entry["answer_session_ids"]), date=lme_date(entry["question_date"]))


def load_longmemeval(data_dir: Path, split: str, limit: int | None = None) -> list[Haystack]:
    """LongMemEval ``split`` ("s": a haystack per question; "oracle": one pooled haystack)."""
    entries = read_json(data_dir / LME_FILES[split])
    if limit is not None:
        entries = entries[:limit]
    if split == "s":
        return [Haystack(name=e["question_id"], turns=tuple(lme_turns(e)), questions=(lme_question(e),))
                for e in entries]
    turns = _unique([turn for entry in entries for turn in lme_turns(entry)])
    return [Haystack(name=f"oracle-{len(entries)}", turns=tuple(turns),
                     questions=tuple(lme_question(e) for e in entries))]


def _unique(turns: list[Turn]) -> list[Turn]:
    """First occurrence of every turn key (a session shared by several questions is stored once)."""
    seen: set[str] = set()
    out = []
    for turn in turns:
        if turn.key not in seen:
            seen.add(turn.key)
            out.append(turn)
    return out


# ---------------------------------------------------------------- LoCoMo


def locomo_date(text: str) -> datetime:
    """``1:56 pm on 8 May, 2023`` as an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def locomo_text(turn: dict[str, Any]) -> str:
    """A turn as a transcript line: ``Speaker: text``, plus the caption of a shared photo."""
    text = f"{turn['speaker']}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    return f"{text} [shares {caption}]" if caption else text


def locomo_turns(conversation: dict[str, Any]) -> Iterator[Turn]:
    n = 1
    while f"session_{n}" in conversation:
        when = locomo_date(conversation[f"session_{n}_date_time"])
        for i, turn in enumerate(conversation[f"session_{n}"]):
            yield Turn(session_id=f"S{n}", index=i, key=turn["dia_id"], role=turn["speaker"],
                       content=locomo_text(turn), date=when)
        n += 1


def evidence_ids(raw: list[str]) -> frozenset[str]:
    """Evidence ``dia_id``s, repairing the few malformed ones (``D8:6; D9:17``, ``D:11:26``)."""
    found = (_DIA_ID.fullmatch(part) for item in raw for part in re.split(r"[;,\s]+", item))
    return frozenset(f"D{m.group(1)}:{m.group(2)}" for m in found if m)


def locomo_questions(sample: dict[str, Any]) -> Iterator[Question]:
    asked = max((t.date for t in locomo_turns(sample["conversation"]) if t.date is not None), default=None)
    for i, qa in enumerate(sample["qa"]):
        category = int(qa.get("category", 0))
        gold = evidence_ids(qa.get("evidence") or [])
        if category == 5 or not gold:
            continue
        sessions = frozenset("S" + g[1:].split(":")[0] for g in gold)
        yield Question(qid=f"{sample['sample_id']}#{i}", qtype=LOCOMO_CATEGORIES.get(category, str(category)),
                       text=qa["question"], gold_sessions=sessions, gold_turns=gold, date=asked)


def load_locomo(data_dir: Path, limit: int | None = None) -> list[Haystack]:
    """One haystack per conversation; ``limit`` keeps the first questions of each."""
    samples = read_json(data_dir / LOCOMO_FILE)
    out = []
    for sample in samples:
        questions = list(locomo_questions(sample))
        if limit is not None:
            questions = questions[:limit]
        out.append(Haystack(name=sample["sample_id"], turns=tuple(locomo_turns(sample["conversation"])),
                            questions=tuple(questions)))
    return out
