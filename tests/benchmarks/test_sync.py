"""The warehouse-sync benchmark runs end to end on a few hundred generated memories and its figures agree."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import sync
from tests.pg import TestCluster

MEMORIES, INCREMENT = 200, 20


@pytest.fixture
def warehouse_url(pg_cluster: TestCluster) -> Iterator[str]:
    url = pg_cluster.new_database(migrated=False)  # the warehouse needs only an empty database
    try:
        yield url
    finally:
        pg_cluster.drop(url)


def test_every_row_a_pushes_b_pulls_in_the_first_and_the_incremental_sync(
        tmp_path: Path, warehouse_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    summary = sync.main(["--memories", str(MEMORIES), "--increment", str(INCREMENT), "--batch", "150",
                         "--source", "generated", "--warehouse", warehouse_url, "--cache", str(tmp_path / "c.sqlite"),
                         "--out", str(tmp_path / "results")])
    first_a, first_b, next_a, next_b = summary["runs"]
    a_rows = summary["counts"]["a"]
    assert summary["mismatch"] == {}
    assert a_rows["memories"] == MEMORIES + INCREMENT
    # Each memory travels with its vector and its history line: the first push sends all A held then.
    per_memory = sum(a_rows.values()) // (MEMORIES + INCREMENT)
    assert per_memory >= 2 and sum(a_rows.values()) == per_memory * (MEMORIES + INCREMENT)
    assert first_a["pushed"] == per_memory * MEMORIES and first_a["pulled"] == 0  # its own rows come back as echoes
    assert first_b["pulled"] == first_a["pushed"] and first_b["pushed"] == 0
    assert next_a["pushed"] == per_memory * INCREMENT == next_b["pulled"]
    assert 0 < next_a["bytes_sent"] < first_a["bytes_sent"] and 0 < next_b["bytes_received"] < first_b["bytes_received"]
    assert first_a["push_s"] > 0 and first_b["pull_s"] > 0 and first_a["push_s"] <= first_a["sync_s"]
    parts = first_a["breakdown"]
    assert parts["warehouse push"] > 0 and parts["writer StageChanges"] > 0 and parts["writer ConfirmPush"] > 0
    assert parts["warehouse push"] + parts["writer StageChanges"] + parts["writer ConfirmPush"] <= first_a["push_s"]
    assert 0 < first_b["breakdown"]["writer ApplyPulled"] <= first_b["pull_s"]
    log = next((tmp_path / "results").glob("*-sync/questions.jsonl"))
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["pushed"] for r in logged] == [r["pushed"] for r in summary["runs"]]
    printed = capsys.readouterr().out
    assert "| A first sync (push all) | 200 | " in printed and f"| B sync after {INCREMENT} new |" in printed
    assert "| step | run s | stage (Writer) s |" in printed
