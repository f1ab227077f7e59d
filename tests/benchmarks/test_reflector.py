"""The Reflector benchmark runs end to end on a tiny synthetic knowledge-update file and templates."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.reflector import run, subgroup
from benchmarks.supersession_set import templated
from m3.embed.minilm import MiniLMEmbedder
from tests.benchmarks.test_supersession import write_data


def test_the_benchmark_flags_the_updates_spares_other_subjects_and_measures_the_pass(
        tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    summary = run(write_data(tmp_path / "data"), embedder, instances=2, cost_n=60, ordinary_n=10,
                  out_root=tmp_path / "results")
    groups = {row["group"]: row for row in summary["groups"]}
    assert (groups["update_said"]["n"], groups["update_said"]["flagged"]) == (2, 2)
    assert groups["restatement"]["false_flags"] == 0
    assert summary["totals"]["distinct_subject_flagged"] == 0
    assert summary["totals"]["recall"] > 0
    cost = summary["cost"]
    assert cost["labelled_set"]["memories"] == 2 * summary["scope"]["pairs"]
    assert cost["one_owner"]["memories"] == 60 and cost["one_owner"]["cpu_s_per_1000"] > 0
    assert summary["ordinary"]["memories"] <= 10 and summary["ordinary"]["cpu_s_per_1000"] is not None
    logged = [json.loads(line) for line in Path(summary["log"]).read_text().splitlines()]
    pairs = [row for row in logged if "group" in row]  # the ordinary store's conflicts are logged too
    assert len(pairs) == summary["scope"]["pairs"] and all("reason" in row for row in logged)


def test_distinct_pairs_are_split_by_whether_the_subject_or_a_value_changed() -> None:
    kinds = {pair.source: subgroup(pair) for pair in templated(6) if pair.group == "distinct"}
    assert kinds["order:id4"] == kinds["contact:name"] == kinds["reading:day"] == "distinct/subject"
    assert kinds["order:small"] == kinds["version:day"] == "distinct/value"
