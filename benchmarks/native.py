"""The native core against its numpy twin, per function, in one run (docs/benchmarks.md, "Native core").

    python -m benchmarks.native [--rows 1000,10000,100000] [--dim 384] [--repeat 15] [--baseline SO]

Synthetic unit vectors shaped like embeddings (clusters around 200 centres, so a query has a real top
and near-ties), one query near a stored row. Each function runs on both paths with the same input; the
results are checked equal before anything is timed. Times are the best of ``--repeat`` calls, in ms: on
a shared machine the fastest call is the one least slowed by others. The load average is printed too.

``--baseline SO`` also times another build of the extension (the ``m3_native*.so`` of another version, e.g.
unpacked from ``pip wheel ./native`` of an older checkout) on the same input in the same run, checks that
it returns the same results, and prints the new build's time over the old one's.
"""

from __future__ import annotations

import argparse
import functools
import importlib.machinery
import importlib.util
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
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


def load_extension(path: Path) -> ModuleType:
    """Another build of ``m3_native`` from its shared library, beside the one m3 imported."""
    loader = importlib.machinery.ExtensionFileLoader("m3_native", str(path))
    spec = importlib.util.spec_from_file_location("m3_native", path, loader=loader)
    assert spec is not None, path
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return bool(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))
    return bool(a == b)


Row = tuple[str, float, float, float]


def rows_for(n: int, dim: int, repeat: int, rng: np.random.Generator,
             baseline: ModuleType | None = None) -> list[Row]:
    """(function, numpy ms, native ms, baseline build's ms or nan) at ``n`` rows."""
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
    # Each case: its name, the numpy twin, and the native call on a given build of the extension.
    cases: list[tuple[str, Callable[[], Any], Callable[[ModuleType], Any]]] = [
        ("top 400 of all rows (f32)", lambda: native.numpy_top_rows(mat, norms, query, 400, every),
         lambda e: e.top_f32(mat, query, 400, every)),
        ("top 400 of all rows (int8 scan + f32 re-rank)", lambda: native.numpy_top_rows(mat, norms, query, 400, every),
         lambda e: e.top_i8(values, scales, sums, mat, query, 400, every)),
        ("top 100 of a third of the rows (f32)", lambda: native.numpy_top_rows(mat, norms, query, 100, third),
         lambda e: e.top_f32(mat, query, 100, third)),
        ("MMR k=8 of a pool of 32", lambda: native.numpy_mmr_order(pool[:32], scores[:32], 8, 0.8),
         lambda e: e.mmr(pool[:32], scores[:32], 8, 0.8)),
        ("MMR k=50 of a pool of 200", lambda: native.numpy_mmr_order(pool, scores, 50, 0.8),
         lambda e: e.mmr(pool, scores, 50, 0.8)),
    ]
    out: list[Row] = []
    for name, slow, fast in cases:
        expected = slow()
        assert same(expected, fast(ext)), name
        old = float("nan")
        if baseline is not None:
            assert same(expected, fast(baseline)), f"{name} (baseline build)"
            old = best_ms(functools.partial(fast, baseline), repeat)
        out.append((name, best_ms(slow, repeat), best_ms(functools.partial(fast, ext), repeat), old))
    before = best_ms(lambda: _blas_top(mat, query, 400), repeat)
    out.append(("(before: BLAS product + argpartition, top 400)", before, float("nan"), float("nan")))
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
    parser.add_argument("--baseline", type=Path, default=None,
                        help="the m3_native*.so of another build, timed beside this one")
    args = parser.parse_args(argv)
    baseline = load_extension(args.baseline) if args.baseline is not None else None
    rng = np.random.default_rng(0)
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; dim {args.dim}; "
          f"best of {args.repeat}; results checked equal on every path")
    extra = (" baseline build ms | native ÷ baseline |", "---:|---:|") if baseline is not None else ("", "")
    print(f"| rows | function | numpy ms | native ms | speed-up |{extra[0]}\n|---:|---|---:|---:|---:|{extra[1]}")
    for n in (int(x) for x in args.rows.split(",")):
        for name, slow, fast, old in rows_for(n, args.dim, args.repeat, rng, baseline):
            timed = not math.isnan(fast)  # the "before" row has no native time
            ratio = f"{slow / fast:.1f}x" if timed else ""
            fast_text = f"{fast:.3f}" if timed else ""
            versus = ""
            if baseline is not None:
                versus = f" {old:.3f} | ×{fast / old:.2f} |" if timed else " | |"
            print(f"| {n:,} | {name} | {slow:.3f} | {fast_text} | {ratio} |{versus}", flush=True)
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
