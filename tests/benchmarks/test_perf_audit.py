"""The read-audit benchmark runs end to end on a small store and reports what docs/benchmarks.md quotes."""

from __future__ import annotations

from pathlib import Path

from benchmarks import perf_audit


def test_perf_audit_times_search_with_the_audit_on_and_off_and_counts_the_records(tmp_path: Path) -> None:
    summary = perf_audit.main(["--size", "200", "--queries", "5", "--rounds", "2", "--out", str(tmp_path)])
    row = summary["row"]
    assert row["searches_each"] == 10
    assert row["on_p50_ms"] > 0 and row["off_p50_ms"] > 0 and row["ratio_p50"] > 0
    # Only the searches with the audit on record (the 10 timed and the 5 of the warm-up), at most k=10 hits each.
    assert 0 < row["audit_records"] <= (10 + 5) * 10
