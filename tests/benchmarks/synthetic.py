"""Tiny data sets in the exact shapes of the shared dev data (LongMemEval S and oracle, LoCoMo).

The harness's smoke tests run on these, so they run everywhere (CI has no copy
of the benchmark data). Topics are distinct enough that the gold session of a
question shares words with it: a hit is possible, not guaranteed.
"""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

TOPICS = [
    ("garden", "I planted tomatoes and basil in the raised garden bed near the fence."),
    ("car", "The car needs new brake pads; the garage quoted two hundred dollars."),
    ("trip", "We booked a train trip to Lisbon for the second week of June."),
    ("cat", "My cat Miso only eats the salmon flavoured food from the blue tin."),
    ("job", "I start the new job at the bakery on Monday at six in the morning."),
    ("piano", "Piano lessons moved to Thursday evenings with a new teacher called Ana."),
]
QUESTIONS = {"garden": "What did I plant in the garden bed?", "car": "How much will the brake pads cost?",
             "trip": "Where are we going by train in June?", "cat": "Which food does Miso eat?"}


def _session(sid: str, topic: str, text: str, turns: int) -> list[dict[str, Any]]:
    out = [{"role": "user", "content": text, "has_answer": True}]
    for i in range(1, turns):
        role = "assistant" if i % 2 else "user"
        out.append({"role": role, "content": f"Turn {i} of {sid}: noted, anything else on the {topic}?"})
    return out


def _lme_entry(n: int, topic: str, sessions: int, turns: int) -> dict[str, Any]:
    chosen = [TOPICS[(n + i) % len(TOPICS)] for i in range(sessions)]
    if topic not in [name for name, _ in chosen]:
        chosen[0] = next(t for t in TOPICS if t[0] == topic)
    ids = [f"q{n}_s{i}" for i in range(sessions)]
    return {
        "question_id": f"q{n}", "question_type": ["single-session-user", "multi-session"][n % 2],
        "question": QUESTIONS[topic], "answer": "see the session", "question_date": "2023/06/30 (Fri) 10:00",
        "haystack_dates": [f"2023/05/{10 + i:02d} (Wed) 0{i % 10}:15" for i in range(sessions)],
        "haystack_session_ids": ids,
        "haystack_sessions": [_session(sid, name, text, turns) for sid, (name, text) in zip(ids, chosen, strict=True)],
        "answer_session_ids": [ids[[name for name, _ in chosen].index(topic)]],
    }


def _locomo() -> list[dict[str, Any]]:
    conversation: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for n, (name, text) in enumerate(TOPICS[:4], 1):
        conversation[f"session_{n}_date_time"] = f"1:56 pm on {n} May, 2023"
        conversation[f"session_{n}"] = [
            {"speaker": "Ana" if i % 2 == 0 else "Ben", "dia_id": f"D{n}:{i + 1}",
             "text": text if i == 0 else f"That is interesting, tell me more about the {name} ({i})."}
            for i in range(6)]
    qa = [{"question": QUESTIONS[name], "answer": "x", "category": 1 + n % 4, "evidence": [f"D{n + 1}:1"]}
          for n, (name, _) in enumerate(TOPICS[:4])]
    qa.append({"question": "Adversarial question", "answer": "x", "category": 5, "evidence": ["D1:1"]})
    return [{"sample_id": "conv-synthetic", "conversation": conversation, "qa": qa}]


def write_dev_data(root: Path) -> Path:
    """Write the three files where the harness looks for them under ``root``; return ``root``."""
    (root / "longmemeval").mkdir(parents=True, exist_ok=True)
    (root / "locomo").mkdir(parents=True, exist_ok=True)
    topics = list(QUESTIONS)
    s_split = [_lme_entry(n, topics[n % len(topics)], sessions=4, turns=5) for n in range(3)]
    with lzma.open(root / "longmemeval" / "longmemeval_s_dev.json.xz", "wt", encoding="utf-8") as fh:
        json.dump(s_split, fh)
    oracle = [_lme_entry(10 + n, topics[n % len(topics)], sessions=3, turns=8) for n in range(4)]
    (root / "longmemeval" / "longmemeval_oracle_dev.json").write_text(json.dumps(oracle), encoding="utf-8")
    (root / "locomo" / "locomo_dev.json").write_text(json.dumps(_locomo()), encoding="utf-8")
    return root
