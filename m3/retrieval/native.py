"""The native core (the optional ``m3_native`` extension, native/) or its numpy twin, chosen once per process.

Both paths return the same results, bit for bit, because both score with one **reference dot product**:
eight f32 lanes, lane ``l`` summing from -0.0 the products of elements ``l, l+8, l+16, ...`` in order, then
``((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7))`` (native/src/dot.rs; :func:`reference_dot` here). BLAS is faster
than that twin but its rounding depends on the row's place in the matrix, so the numpy path uses BLAS
only to find a **shortlist**: every row whose reference score could reach the n-th best, by the bound
``|blas - exact| <= gamma_d * |a| * |q|`` (``gamma_d = d u / (1 - d u)``, u = 2^-24) on both sides; then
the shortlist is scored with the reference dot. One order everywhere: score descending, then row ascending.

``search.native`` (auto | on | off) picks the path when the actor system starts (:func:`select`); before
that, ``M3_SEARCH_NATIVE`` does, so code run without a configuration follows the same switch.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from m3.errors import ConfigError

Matrix = npt.NDArray[np.float32]
Rows = npt.NDArray[np.int64]
MODES = ("auto", "on", "off")
LANES = 8


def _load() -> ModuleType | None:
    try:
        return importlib.import_module("m3_native")  # untyped, and absent where nobody built it
    except ImportError:
        return None


_EXT = _load()
_state: dict[str, Any] = {"mode": "auto", "native": _EXT is not None}


def available() -> bool:
    """True when the extension is installed (``pip install ./native``)."""
    return _EXT is not None


def resolve(mode: str) -> str:
    """The path ``search.native = mode`` takes here ("native" or "numpy"), changing nothing.

    A mode other than auto, on and off, or ``on`` without the extension, is a :class:`ConfigError`.
    """
    mode = mode.strip().lower()
    if mode not in MODES:
        raise ConfigError(f"search.native is {mode!r}; it must be one of {', '.join(MODES)}",
                          hint="Set search.native to auto (the default), on or off.")
    if mode == "on" and _EXT is None:
        raise ConfigError("search.native is on but the m3_native extension is not installed",
                          hint="Install it with `pip install ./native` (needs a Rust toolchain), or set "
                               "search.native to auto or off: the numpy path returns the same results.")
    return "native" if _EXT is not None and mode != "off" else "numpy"


def select(mode: str) -> str:
    """Take the path :func:`resolve` names for ``mode`` from now on, in this process; its name.

    Called where the actor system starts, so ``on`` without the extension stops the start there.
    """
    chosen = resolve(mode)
    _state.update(mode=mode.strip().lower(), native=chosen == "native")
    return chosen


def active() -> bool:
    return bool(_state["native"])


def path() -> str:
    return "native" if active() else "numpy"


def status() -> dict[str, Any]:
    """What ``m3 doctor`` and ``diagnostics_store_status`` show: the setting, the path in use, the extension."""
    return {"mode": _state["mode"], "path": path(), "extension_installed": available()}


# -- the reference dot product, in numpy ----------------------------------------------------------------------

def reference_dot(mat: Matrix, query: Matrix) -> Matrix:
    """Each row of ``mat`` dotted with ``query`` in the reference order (bit-equal to m3_native.dot_rows).

    The products are padded with -0.0 (``x + -0.0`` is ``x``, bit for bit) to whole groups of eight, so a
    reduction over the group axis, which numpy runs group after group from ``initial``, is each lane's sum.
    """
    dim = query.shape[0]
    mat = np.asarray(mat, dtype=np.float32).reshape(-1, dim)
    groups = -(-dim // LANES)
    products = np.full((mat.shape[0], groups * LANES), -0.0, dtype=np.float32)
    np.multiply(mat, np.asarray(query, dtype=np.float32), out=products[:, :dim])
    acc = np.add.reduce(products.reshape(-1, groups, LANES), axis=1, initial=-0.0)
    a = [acc[:, lane] for lane in range(LANES)]
    out: Matrix = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
    return out


def gamma(dim: int) -> float:
    """The classic bound on the relative error of a ``dim``-term f32 sum in any order."""
    du = dim * 2.0**-24
    return du / (1.0 - du)


# -- top-k ------------------------------------------------------------------------------------------------------

#: Rows scanned from which the native path goes through the matrix's int8 copy (:class:`Int8Copy`): below it
#: the f32 matrix sits in the processor's cache and the int8 shortlist costs more than it saves (1k rows:
#: 0.20 ms against 0.12), above it the f32 scan waits on memory (10k: 0.59 ms against 1.05; docs/search.md).
INT8_FROM_ROWS = 4096


class Int8Copy:
    """A matrix's int8 copy for :func:`top_rows` (the native core's ``quantise`` rule), kept row for row
    beside it by its owner; only where the extension is installed (:func:`int8_copy`)."""

    def __init__(self, dim: int):
        self.values = np.zeros((0, dim), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        self.abs_sums = np.zeros(0, dtype=np.int32)

    def grow(self, rows: int) -> None:
        """Room for ``rows`` rows (new rows are zero: score 0, bound 0)."""
        extra = rows - len(self.scales)
        if extra > 0:
            self.values = np.pad(self.values, ((0, extra), (0, 0)))
            self.scales = np.pad(self.scales, (0, extra))
            self.abs_sums = np.pad(self.abs_sums, (0, extra))

    def set(self, rows: Rows, matrix: Matrix) -> None:
        """Quantise ``matrix``'s rows into ``rows`` (which the copy has room for)."""
        assert _EXT is not None
        values, scales, sums = _EXT.quantise(np.ascontiguousarray(matrix, dtype=np.float32))
        self.values[rows] = values
        self.scales[rows] = scales
        self.abs_sums[rows] = sums

    def clear(self, row: int) -> None:
        self.values[row] = 0
        self.scales[row] = 0.0
        self.abs_sums[row] = 0


def int8_copy(dim: int) -> Int8Copy | None:
    """An empty int8 copy for a matrix of ``dim`` columns, or None without the extension (numpy never reads one)."""
    return Int8Copy(dim) if _EXT is not None else None


def top_rows(mat: Matrix, norms: Matrix, query: Matrix, n: int, rows: Rows,
             int8: Int8Copy | None = None) -> tuple[Rows, Matrix]:
    """The best ``n`` of ``rows`` by reference dot with ``query``: (rows, scores), best first, ties by row.

    ``norms`` holds each row's L2 norm (the numpy path's shortlist bound needs it); ``int8``, the matrix's int8
    copy (its first ``len(mat)`` rows), lets the native path scan that instead from :data:`INT8_FROM_ROWS` rows:
    the same result (the int8 rule's shortlist is re-scored with the reference dot).
    """
    if n <= 0 or rows.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if _EXT is not None and active():
        query = np.ascontiguousarray(query, dtype=np.float32)
        used = mat.shape[0]
        found: tuple[Rows, Matrix]
        if int8 is not None and rows.size >= INT8_FROM_ROWS and n < rows.size:
            found = _EXT.top_i8(int8.values[:used], int8.scales[:used], int8.abs_sums[:used], mat, query, n, rows)
        else:
            found = _EXT.top_f32(mat, query, n, rows)
        return found
    return numpy_top_rows(mat, norms, query, n, rows)


def numpy_top_rows(mat: Matrix, norms: Matrix, query: Matrix, n: int, rows: Rows) -> tuple[Rows, Matrix]:
    """:func:`top_rows` without the extension: a BLAS shortlist, re-scored with :func:`reference_dot`."""
    if n <= 0 or rows.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    shortlist = rows
    if n < rows.size:
        # A dense product and a pick beat copying most of the matrix; either is within the bound.
        approx = _blas(mat, query)[rows] if rows.size > mat.shape[0] // 4 else _blas(mat[rows], query)
        slack = 2.02 * gamma(mat.shape[1]) * norms[rows].astype(np.float64) * float(np.linalg.norm(query)) + 1e-30
        lower, upper = approx - slack, approx + slack
        floor = np.partition(lower, rows.size - n)[rows.size - n]  # the n-th largest lower end
        shortlist = rows[upper >= floor]
    scores = reference_dot(mat[shortlist], query)
    order = np.lexsort((shortlist, -scores))[:n]
    return shortlist[order].astype(np.int64), scores[order]


#: Largest query-by-row product :func:`rows_above` holds at once (16 MiB of float32).
ABOVE_CHUNK = 4_000_000


def _blas(a: Matrix, b: Matrix) -> Matrix:
    """``a @ b`` in float32 through BLAS, for a shortlist. Once in a CI run OpenBLAS flagged an invalid operation
    on a 1x5 by 5x2 product of finite numbers, and not on the rerun: the flag is ignored, and should the product
    of finite inputs hold a non-finite value, it is computed again in float64 (closer to the reference, so
    within the shortlist's bound)."""
    with np.errstate(invalid="ignore", over="ignore"):
        out = a @ b
    if np.isfinite(out).all() or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return out
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def rows_above(mat: Matrix, norms: Matrix, queries: Matrix, live: npt.NDArray[np.bool_],
               threshold: float) -> list[Rows]:
    """For each row of ``queries``, the ``live`` rows of ``mat`` whose reference dot with it may exceed
    ``threshold``: every row that does, perhaps a few just under.

    One BLAS product serves many queries (a vector's supersession candidates, a unit of vectors at a time);
    ranking the rows found with :func:`top_rows` gives exactly the rows above ``threshold`` that a
    :func:`top_rows` over every live row would, since the cut is loosened by twice the error bound of
    :func:`numpy_top_rows` (the bound covers BLAS against the reference on either side).
    """
    if queries.shape[0] == 0 or mat.shape[0] == 0:
        return [np.zeros(0, dtype=np.int64) for _ in range(queries.shape[0])]
    largest = float(norms.max(initial=0.0))
    cuts = threshold - (4.04 * gamma(mat.shape[1]) * largest * np.linalg.norm(queries, axis=1) + 1e-6)
    step = max(1, ABOVE_CHUNK // mat.shape[0])
    found: list[Rows] = []
    for start in range(0, queries.shape[0], step):
        approx = _blas(queries[start:start + step], mat.T)
        above = (approx > cuts[start:start + step, None].astype(np.float32)) & live
        found.extend(np.flatnonzero(mask).astype(np.int64) for mask in above)
    return found


# -- MMR --------------------------------------------------------------------------------------------------------

def mmr_order(vectors: Matrix, scores: npt.NDArray[np.float64], k: int, lam: float) -> list[int]:
    """Pool indices in MMR's pick order (at most ``k``), every member having a vector (ranking.mmr's rule)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    if _EXT is not None and active():
        picked: list[int] = _EXT.mmr(vectors, scores, k, float(lam))
        return picked
    return numpy_mmr_order(vectors, scores, k, lam)


def numpy_mmr_order(vectors: Matrix, scores: npt.NDArray[np.float64], k: int, lam: float) -> list[int]:
    """:func:`mmr_order` without the extension: the same f64 arithmetic, one similarity row per pick."""
    max_sim = [0.0] * len(scores)
    remaining = list(range(len(scores)))
    chosen: list[int] = []
    while remaining and len(chosen) < k:
        best = max(remaining, key=lambda i: lam * float(scores[i]) - (1 - lam) * max_sim[i])
        remaining.remove(best)
        chosen.append(best)
        if not remaining:
            break
        sims = reference_dot(vectors[remaining], vectors[best])
        for i, sim in zip(remaining, sims.tolist(), strict=True):
            # max_sim starts at 0, so this is ranking.mmr's max(max_sim, max(0, sim)).
            max_sim[i] = max(max_sim[i], sim)
    return chosen


def pair_dot(a: Matrix, b: Matrix) -> float:
    """The reference dot of two vectors (MMR's similarity when only some of the pool has vectors)."""
    return float(reference_dot(a.reshape(1, -1), b)[0])


if os.environ.get("M3_SEARCH_NATIVE", "").strip().lower() in MODES:
    _state.update(mode=os.environ["M3_SEARCH_NATIVE"].strip().lower())
    _state.update(native=_EXT is not None and _state["mode"] != "off")
