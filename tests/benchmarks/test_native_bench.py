"""benchmarks.native runs end to end on a tiny matrix and prints one row per function and size."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.skipif(not native.available(), reason="the m3_native extension is not installed")
def test_another_build_given_as_the_baseline_is_timed_beside_this_one_and_checked_equal(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert native._EXT is not None
    built = Path(native._EXT.__file__).parent.glob("m3_native*.so")  # this build stands in for another one
    bench.main(["--rows", "500", "--dim", "16", "--repeat", "1", "--baseline", str(next(built))])
    out = capsys.readouterr().out
    assert "baseline build ms | native ÷ baseline |" in out
    timed = [line for line in out.splitlines() if line.startswith("| 500 | top") or line.startswith("| 500 | MMR")]
    assert len(timed) == 5 and all(line.count("|") == 8 and "×" in line for line in timed)
