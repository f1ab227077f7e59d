"""benchmarks.native runs end to end on a tiny matrix and prints one row per function and size."""

from __future__ import annotations

import pytest

from benchmarks import native as bench
from m3.retrieval import native


@pytest.mark.skipif(not native.available(), reason="the m3_native extension is not installed")
def test_the_native_benchmark_checks_both_paths_agree_and_prints_a_row_per_function(
        capsys: pytest.CaptureFixture[str]) -> None:
    bench.main(["--rows", "500", "--dim", "16", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "load average at start" in out and "load average at end" in out
    assert sum(1 for line in out.splitlines() if line.startswith("| 500 |")) == 6
