"""Latency statistics shared by the performance benchmarks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentiles_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99, mean and max of ``seconds``, in milliseconds."""
    if not seconds:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "mean_ms": 0.0, "max_ms": 0.0}
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return {"p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3), "p99_ms": round(float(p99), 3),
            "mean_ms": round(float(ms.mean()), 3), "max_ms": round(float(ms.max()), 3)}


def ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("nan")
