"""PostgreSQL supersession candidates: one statement per unit of vectors vs one query per vector, A/B in one run.

``python -m benchmarks.pg_nearest_ab``: a private embedded PostgreSQL cluster, ``--memories`` notes of one
agent with random unit vectors and the model's HNSW index, then ``--unit`` more stored in an open
transaction (as the Writer stores a unit before deciding on it). Alternately, ``--repeats`` times: the
neighbours of the unit's vectors in one statement (``pg_nearest.nearest_each``, what the Writer runs now)
and with one ``pg_nearest.nearest`` per vector (what it ran before). Both answer the same; the medians of
each are printed. Alternating in one process keeps a busy machine's noise out of the ratio.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.ingest import store_url
from m3.protocols.messages.memory import NewMemory, WriteMemories
from m3.store import memories as rows
from m3.store import pg_nearest, postgres, vectors
from m3.store.clock import Clock
from m3.store.engine import StoreOptions, migrate_store, open_engine
from m3.store.memory_writes import MemoryWrites

MODEL, LIMIT, THRESHOLD = "bench-model", 32, 0.92


def run(memories: int, unit: int, dim: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((memories + unit, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    root = Path(tempfile.mkdtemp(prefix="m3-bench-nearest-"))
    try:
        with store_url("postgres", root) as url:
            options = StoreOptions(url=url)
            migrate_store(options)
            engine = open_engine(options, "writer")
            try:
                with engine.connect() as conn:
                    return _measure(conn, matrix, memories, unit, repeats)
            finally:
                engine.dispose()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _measure(conn: Any, matrix: np.ndarray, memories: int, unit: int, repeats: int) -> dict[str, Any]:
    dim, total = matrix.shape[1], memories + unit
    notes = tuple(NewMemory(type="note", agent_id="bench", content=f"bench note {i}") for i in range(total))
    with conn.begin():
        [(outcomes, _)] = MemoryWrites(conn, Clock()).write_all([WriteMemories(memories=notes, actor="bench")])
    ids = [out.id for out in outcomes]
    with conn.begin():
        postgres.ensure_hnsw_index(conn, MODEL, dim)
        vectors.store(conn, MODEL, dim, ids[:memories], matrix[:memories], datetime.now(UTC),
                      existing=dict.fromkeys(ids[:memories], False))
    batched: list[float] = []
    single: list[float] = []
    with conn.begin():
        vectors.store(conn, MODEL, dim, ids[memories:], matrix[memories:], datetime.now(UTC),
                      existing=dict.fromkeys(ids[memories:], False))
        groups = [(rows.owner_clause("note", "bench", None), ids[memories:])]
        owner_rows = [rows.load(conn, i) for i in ids[memories:]]
        for _ in range(repeats):
            started = time.perf_counter()
            pg_nearest.nearest_each(conn, MODEL, dim, groups, LIMIT, 1.0 - THRESHOLD)
            batched.append(time.perf_counter() - started)
            started = time.perf_counter()
            for k, row in enumerate(owner_rows):
                pg_nearest.nearest(conn, MODEL, dim, matrix[memories + k], rows.same_owner_clause(row), LIMIT)
            single.append(time.perf_counter() - started)
        conn.rollback()
    one, each = statistics.median(batched), statistics.median(single)
    return {"memories": memories, "unit": unit, "dim": dim, "repeats": repeats,
            "one_statement_ms": round(1000 * one, 1), "query_per_vector_ms": round(1000 * each, 1),
            "ms_per_vector_one_statement": round(1000 * one / unit, 2),
            "ms_per_vector_query_each": round(1000 * each / unit, 2), "speed_up": round(each / one, 2)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--unit", type=int, default=64, help="vectors of the unit (the Writer's max batch)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    row = run(args.memories, args.unit, args.dim, args.repeats)
    print(row)
    return row


if __name__ == "__main__":
    main()
