"""The Observer benchmark runs end to end on synthetic LongMemEval_S data: both columns, the cost figures."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks import loop_observe
from benchmarks.cache import CachingEmbedder
from tests.benchmarks.synthetic import write_dev_data
from tests.benchmarks.test_smoke import HashEmbedder


def test_the_comparison_reports_shr_with_and_without_the_observer_per_type(tmp_path: Path) -> None:
    data = write_dev_data(tmp_path / "data")
    args = argparse.Namespace(data=data, k="1,5", per_type=1, types="", cache=None, threads=None)
    result = loop_observe.lme(args, CachingEmbedder(HashEmbedder(), tmp_path / "cache.sqlite"))
    assert result["questions"] == 2 and set(result["shr"]) == {"single-session-user", "multi-session", "overall"}
    for row in result["shr"].values():
        assert all(0.0 <= row[side][k] <= 1.0 for side in ("without", "with") for k in (1, 5))
    assert [e["question_id"] for e in result["log"]] == ["q0", "q1"] and result["turns"] > 0


def test_the_cost_run_reads_every_item_and_reports_per_thousand(tmp_path: Path) -> None:
    data = write_dev_data(tmp_path / "data")
    result = loop_observe.cost(argparse.Namespace(data=data, items=60, budget=25, store="sqlite"))
    assert result["items"] > 25 and result["ticks"] >= 2
    assert result["step_cpu_s_per_1000"] > 0
