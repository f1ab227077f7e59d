"""The native core against its numpy twin, per function, in one run (docs/benchmarks.md, "Native core").

    python -m benchmarks.native [--rows 1000,10000,100000] [--dim 384] [--repeat 15]

Synthetic unit vectors shaped like embeddings (clusters around 200 centres, so a query has a real top
and near-ties), one query near a stored row. Each function runs on both paths with the same input; the
results are checked equal before anything is timed. Times are the best of ``--repeat`` calls, in ms: on
a shared machine the fastest call is the one least slowed by others. The load average is printed too.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from m3.retrieval import native


def unit_rows(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    centres = rng.normal(size=(200, dim)).astype(np.float32)
    mat = centres[rng.integers(0, 200, size=n)] + 0.8 * rng.normal(size=(n, dim)).astype(np.float32)
    out: np.ndarray = (mat / np.linalg.norm(mat, axis=1, keepdims=True)).astype(np.float32)
    return out


def best_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm: first-touch pages and caches out of the measurement
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def rows_for(n: int, dim: int, repeat: int, rng: np.random.Generator) -> list[tuple[str, float, float]]:
    """(function, numpy ms, native ms) at ``n`` rows."""
    ext = native._EXT
    assert ext is not None, "build the extension first: pip install ./native"
    mat = unit_rows(n, dim, rng)
    norms = np.linalg.norm(mat, axis=1).astype(np.float32)
    query = mat[7] + 0.3 * unit_rows(1, dim, rng)[0]
    query = (query / np.linalg.norm(query)).astype(np.float32)
    every = np.arange(n, dtype=np.int64)
    third = every[::3].copy()
    values, scales, sums = ext.quantise(mat)
    pool = mat[:200]
    scores = np.linspace(1.0, 0.5, 200)
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("top 400 of all rows (f32)", lambda: native.numpy_top_rows(mat, norms, query, 400, every),
         lambda: ext.top_f32(mat, query, 400, every)),
        ("top 400 of all rows (int8 scan + f32 re-rank)", lambda: native.numpy_top_rows(mat, norms, query, 400, every),
         lambda: ext.top_i8(values, scales, sums, mat, query, 400, every)),
        ("top 100 of a third of the rows (f32)", lambda: native.numpy_top_rows(mat, norms, query, 100, third),
         lambda: ext.top_f32(mat, query, 100, third)),
        ("MMR k=8 of a pool of 32", lambda: native.numpy_mmr_order(pool[:32], scores[:32], 8, 0.8),
         lambda: ext.mmr(pool[:32], scores[:32], 8, 0.8)),
        ("MMR k=50 of a pool of 200", lambda: native.numpy_mmr_order(pool, scores, 50, 0.8),
         lambda: ext.mmr(pool, scores, 50, 0.8)),
    ]
    out = []
    for name, slow, fast in cases:
        a, b = slow(), fast()
        if isinstance(a, tuple):
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), name
        else:
            assert a == b, name
        out.append((name, best_ms(slow, repeat), best_ms(fast, repeat)))
    old = best_ms(lambda: _blas_top(mat, query, 400), repeat)
    out.append(("(before: BLAS product + argpartition, top 400)", old, float("nan")))
    return out


def _blas_top(mat: np.ndarray, query: np.ndarray, n: int) -> np.ndarray:
    """What VectorIndex.top did before the native core: BLAS scores, a partition, a stable sort."""
    sims = mat @ query
    part = np.argpartition(-sims, n)[:n]
    return part[np.argsort(-sims[part], kind="stable")]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000,10000,100000")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; dim {args.dim}; "
          f"best of {args.repeat}; results checked equal on both paths")
    print("| rows | function | numpy ms | native ms | speed-up |\n|---:|---|---:|---:|---:|")
    for n in (int(x) for x in args.rows.split(",")):
        for name, slow, fast in rows_for(n, args.dim, args.repeat, rng):
            timed = not math.isnan(fast)  # the "before" row has no native time
            ratio = f"{slow / fast:.1f}x" if timed else ""
            fast_text = f"{fast:.3f}" if timed else ""
            print(f"| {n:,} | {name} | {slow:.3f} | {fast_text} | {ratio} |", flush=True)
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
