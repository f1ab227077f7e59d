"""The coordination stress benchmark at a reduced size: agents in threads, in processes with their own m3
on the same SQLite store, and in processes over remote MCP with bearer tokens, all at once.

The full size (64 threads plus 4 processes) runs from ``benchmarks/`` (see
docs/benchmarks.md); here every surface takes part and every check must hold: each
acknowledged write, handoff, claim and completion is stored and no task was claimed while another
agent's lease on it was valid. Short leases make some abandoned tasks expire and be taken over.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import coordination_stress


@pytest.mark.slow
def test_a_reduced_stress_run_stores_every_acknowledged_operation_and_never_double_claims(tmp_path: Path) -> None:
    summary = coordination_stress.main([
        "--threads", "8", "--direct", "2", "--remote", "2", "--agents-per-process", "2", "--ops", "15",
        "--abandon-share", "0.3", "--short-lease", "0.2", "--results", str(tmp_path),
    ])
    checks = summary["verification"]
    assert checks["ok"], checks["examples"]
    assert summary["agents"] == {"thread": 8, "direct": 4, "remote": 4}
    assert summary["errors"] == []
    assert checks["memories_acknowledged"] == 16 * 3 and checks["memories_missing"] == 0
    assert checks["handoffs_acknowledged"] == 16 * 3 and checks["handoffs_missing_or_misrouted"] == 0
    assert checks["claims_acknowledged"] == checks["claims_in_history"] > 0
    assert checks["lease_violations"] == 0
    assert checks["claims_abandoned"] > 0
    surfaces = {(row["operation"], row["surface"]) for row in summary["latency"]}
    assert {("task_claim", s) for s in ("thread", "direct", "remote")} <= surfaces
    assert (Path(summary["results_dir"]) / "summary.json").exists()
