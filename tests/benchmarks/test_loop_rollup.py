"""The roll-up cost benchmark runs end to end on a small store and reports what docs/benchmarks.md quotes."""

from __future__ import annotations

from pathlib import Path

from benchmarks import loop_rollup


def test_the_rollup_benchmark_writes_beliefs_and_reports_the_cpu_of_each_phase(tmp_path: Path) -> None:
    result = loop_rollup.run(f"sqlite:///{tmp_path / 'bench.db'}", notes=60, owners=2, budget=100, seed=3)
    assert result["notes"] == 60 and result["ticks"] >= 1 and result["beliefs"] >= 2
    assert set(result["cpu_s"]) == {"step", "commit", "embed_beliefs"}
    assert all(v >= 0 for v in result["cpu_s"].values()) and result["cpu_total_s"] > 0


def test_the_synthetic_notes_spread_over_owners_half_of_them_on_recurring_topics() -> None:
    notes = loop_rollup.notes_for(40, 4, seed=1)
    assert {n.agent_id for n in notes} == {f"agent-{i}" for i in range(4)}
    assert sum(not n.content.startswith("Remember the") for n in notes) == 20
    assert loop_rollup.notes_for(40, 4, seed=1) == notes  # the same seed, the same notes
