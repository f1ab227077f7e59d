"""The Writer's time per stored vector of a supersession type, one vector per transaction and 64 per group.

``python -m benchmarks.perf_vector_store [--store postgres]``: a new store (a temporary SQLite file or a
private embedded PostgreSQL cluster) gets ``--memories`` notes of one agent with their vectors (random unit
vectors: no pair is above the supersession threshold, as with distinct dataset texts). Then a Writer of
its own stores the vectors of more notes of that agent: ``--single`` messages of one vector, each awaited
(what one writer sends), then ``--groups`` messages of 64 (what a group commit under many writers
stores as one unit). What is timed is the Writer's work alone: no gateway, no embedding. Run it from a
checkout of each version to compare them.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.ingest import STORES, store_url
from benchmarks.report import RunDir, rows_text
from m3.actors.supervisor import ActorHandle
from m3.actors.writer import Writer
from m3.protocols.messages.memory import NewMemory, StoreVectors, WriteMemories
from m3.retrieval.supersession import SupersessionPolicy
from m3.store import postgres, vectors
from m3.store.engine import StoreOptions, migrate_store, open_engine

MODEL, GROUP, ASK_S = "bench-model", 64, 600.0


def _notes(writer: ActorHandle, start: int, n: int) -> list[str]:
    ids: list[str] = []
    for at in range(start, start + n, 500):
        memories = tuple(NewMemory(type="note", agent_id="bench", content=f"bench note {i}")
                         for i in range(at, min(at + 500, start + n)))
        ids += [out.id for out in writer.ask(WriteMemories(memories=memories, actor="bench"), ASK_S)]
    return ids


def _store(writer: ActorHandle, ids: list[str], matrix: np.ndarray) -> None:
    writer.ask(StoreVectors(model=MODEL, dim=matrix.shape[1], ids=tuple(ids),
                            vectors=np.ascontiguousarray(matrix, "<f4").tobytes()), ASK_S)


def _prefill(options: StoreOptions, store: str, ids: list[str], matrix: np.ndarray) -> None:
    """The store as it stands: vectors stored beside the Writer (no decisions, not profiled with it), and on
    PostgreSQL the model's HNSW index."""
    engine = open_engine(options, "writer")
    try:
        with engine.begin() as conn:
            if store == "postgres":
                postgres.ensure_hnsw_index(conn, MODEL, matrix.shape[1])
            vectors.store(conn, MODEL, matrix.shape[1], ids, matrix, datetime.now(UTC),
                          existing=dict.fromkeys(ids, False))
    finally:
        engine.dispose()


def run(store: str, memories: int, dim: int, single: int, groups: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((memories + single + groups * GROUP, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    root = Path(tempfile.mkdtemp(prefix=f"m3-bench-vectors-{store}-"))
    try:
        with store_url(store, root) as url:
            options = StoreOptions(url=url)
            migrate_store(options)
            policy = SupersessionPolicy(threshold=0.92, exempt_types=frozenset({"conversation"}))
            writer = ActorHandle("writer", Writer, options, max_batch=GROUP, policy=policy, searcher=None,
                                 embedder=None).start()
            try:
                ids = _notes(writer, 0, memories + single + groups * GROUP)
                _prefill(options, store, ids[:memories], vectors[:memories])
                started = time.perf_counter()
                for i in range(memories, memories + single):
                    _store(writer, ids[i:i + 1], vectors[i:i + 1])
                one = (time.perf_counter() - started) / single
                started = time.perf_counter()
                for g in range(groups):
                    at = memories + single + g * GROUP
                    _store(writer, ids[at:at + GROUP], vectors[at:at + GROUP])
                grouped = (time.perf_counter() - started) / (groups * GROUP)
            finally:
                writer.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"store": store, "memories": memories, "dim": dim, "ms_per_vector_alone": round(1000 * one, 2),
            "ms_per_vector_in_64": round(1000 * grouped, 2), "vectors_per_s_in_64": round(1 / grouped, 1)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--memories", type=int, default=3000, help="notes with vectors before the timed part")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--single", type=int, default=200, help="one-vector messages timed")
    parser.add_argument("--groups", type=int, default=8, help="64-vector messages timed")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with RunDir("perf_vector_store", args.out) as out:
        row = run(args.store, args.memories, args.dim, args.single, args.groups)
        out.log(row)
        summary = out.summary({"levels": [row]})
    print(rows_text([row], f"Writer time per stored vector ({out.path})"))
    return summary


if __name__ == "__main__":
    main()
