"""The supersession benchmark runs end to end on a tiny synthetic knowledge-update file and templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.supersession import run
from benchmarks.supersession_set import knowledge_updates, restated, templated
from m3.embed.minilm import MiniLMEmbedder
from m3.retrieval.anchors import compare

UPDATES = [("I have 17 postcards in my collection now.", "I just counted: I have 25 postcards in my collection."),
           ("My team has 4 engineers at the moment.", "These days my team has 5 engineers, which is great.")]


def _entry(n: int, old: str, new: str) -> dict[str, Any]:
    def session(text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"Hello there, quick question. {text}", "has_answer": True},
                {"role": "assistant", "content": "Noted, thank you for telling me."}]
    return {"question_id": f"ku{n}", "question_type": "knowledge-update", "question": "How many?", "answer": "x",
            "question_date": "2023/06/30 (Fri) 10:00", "haystack_dates": ["2023/05/20 (Sat) 07:47",
                                                                          "2023/05/10 (Wed) 09:00"],
            "haystack_session_ids": [f"s{n}b", f"s{n}a"], "haystack_sessions": [session(new), session(old)],
            "answer_session_ids": [f"s{n}a", f"s{n}b"]}


def write_data(root: Path) -> Path:
    (root / "longmemeval").mkdir(parents=True)
    entries = [_entry(n, old, new) for n, (old, new) in enumerate(UPDATES)]
    entries.append({**_entry(9, "a", "b"), "question_type": "multi-session"})
    (root / "longmemeval" / "longmemeval_oracle_dev.json").write_text(json.dumps(entries), encoding="utf-8")
    return root


def test_knowledge_updates_pair_the_earlier_and_later_sentence_of_each_question(
        tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    pairs = knowledge_updates(write_data(tmp_path), embedder.embed)
    assert [(p.old, p.new) for p in pairs] == UPDATES  # sessions in date order, the fact's sentence picked
    again = restated(pairs[0])
    assert again is not None and again.new == "I have 25 postcards in my collection now."


def test_templated_distinct_pairs_always_differ_in_an_anchor_and_restatements_never() -> None:
    for pair in templated(4):
        assert compare(pair.old, pair.new).agree == (pair.group == "restatement"), pair


def test_the_benchmark_retires_no_distinct_fact_and_logs_every_pair(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    summary = run(write_data(tmp_path / "data"), embedder, instances=2, out_root=tmp_path / "results")
    assert summary["totals"]["distinct_retired"] == 0
    assert summary["totals"]["distinct_facts"] == 20
    logged = Path(summary["log"]).read_text().splitlines()
    assert len(logged) == summary["scope"]["pairs"]
    assert {json.loads(line)["outcome"] for line in logged} <= {"superseded", "flagged", "untouched"}
    assert [row["threshold"] for row in summary["sweep"]][-2:] == [0.92, 0.95]


def test_with_the_reflector_more_updates_are_caught_and_still_no_distinct_fact_is_retired(
        tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    summary = run(write_data(tmp_path / "data"), embedder, instances=2, out_root=tmp_path / "results")
    alone, both = summary["totals"], summary["totals_with_reflector"]
    assert both["distinct_retired"] == alone["distinct_retired"] == 0
    assert both["recall_superseded"] == alone["recall_superseded"]
    # The two user-said updates (17 -> 25 postcards, 4 -> 5 engineers) sit below 0.92: only the Reflector flags them.
    said = {row["group"]: row for row in summary["groups_with_reflector"]}["update_said"]
    assert (said["n"], said["flagged"]) == (2, 2)
    assert both["recall_caught"] > alone["recall_caught"]
