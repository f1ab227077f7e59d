"""Search latency with the read audit on and off, in one run on one store.

``python -m benchmarks.perf_audit [--store sqlite|postgres] [--size 5000] [--queries 200] [--rounds 6]`` fills a
new store with synthetic memories (random words, so the keyword leg has matches; pseudo-random unit vectors
seeded by each text, so no model runs and only m3's own work is timed), then times ``memory_search`` (k=10)
through the service, as every surface calls it, each query with ``audit.enabled`` on and then off or off and then
on (alternating), on the same actors and store. It prints the p50 and mean of each and their ratio (on /
off), and how many audit records the Writer committed.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import trio
from sqlalchemy import func, select

from benchmarks.ingest import STORES, store_system
from benchmarks.latency import percentiles_ms, ratio
from benchmarks.precomputed import synthetic_vector
from benchmarks.report import RunDir, rows_text
from m3.actors.system import ActorSystem
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from m3.protocols.messages.memory import Flush, NewMemory, WriteMemories
from m3.store.engine import open_engine
from m3.store.schema import read_audit

WORDS = 3000
READER = CallContext(agent_id="bench-reader")


class SyntheticEmbedder:
    """Unit vectors seeded by each text: the Embedder's real path with no model run."""

    model_id = "synthetic-384"
    dim = 384

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([synthetic_vector(t, self.dim) for t in texts]) if texts else np.zeros((0, self.dim),
                                                                                               np.float32)


def texts(rng: random.Random, vocabulary: list[str], n: int, words: int) -> list[str]:
    return [" ".join(rng.choices(vocabulary, k=words)) for _ in range(n)]


def fill(system: ActorSystem, contents: list[str]) -> None:
    for start in range(0, len(contents), 256):
        batch = tuple(NewMemory(content=c, type="note", scope="user", agent_id="bench-writer")
                      for c in contents[start:start + 256])
        system.writer.ask(WriteMemories(memories=batch, actor="bench-writer"), system.ask_timeout)
    system.wait_embedded(3600)


def timed(services: dict[bool, Service], queries: list[str], k: int, rounds: int) -> dict[bool, list[float]]:
    """Each query searched once with the audit on and once off, in turn (the first of the pair alternates), so
    that the machine's other load falls on both alike."""
    samples: dict[bool, list[float]] = {True: [], False: []}

    async def run() -> None:
        for i in range(rounds * len(queries)):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                started = time.perf_counter()
                await services[on].call("memory_search", {"query": queries[i % len(queries)], "k": k}, READER)
                samples[on].append(time.perf_counter() - started)
    trio.run(run)
    return samples


def audit_rows(system: ActorSystem) -> int:
    system.audit_keeper.ask(Flush(), system.ask_timeout)
    system.writer.ask(Flush(), system.ask_timeout)
    engine = open_engine(system.options, "reader")
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(read_audit)).scalar_one())
    finally:
        engine.dispose()


def measure(system: ActorSystem, queries: list[str], rounds: int, k: int) -> dict[str, Any]:
    services = {on: Service(system.config.with_overrides(audit__enabled=on), system, default_registry())
                for on in (True, False)}
    timed(services, queries[:20], k, 1)  # warm-up: caches, the dense matrix, statement compilation
    samples = timed(services, queries, k, rounds)
    stats_on, stats_off = percentiles_ms(samples[True]), percentiles_ms(samples[False])
    return {"searches_each": len(samples[True]), "on_p50_ms": stats_on["p50_ms"], "off_p50_ms": stats_off["p50_ms"],
            "on_mean_ms": stats_on["mean_ms"], "off_mean_ms": stats_off["mean_ms"],
            "ratio_p50": ratio(stats_on["p50_ms"], stats_off["p50_ms"]),
            "ratio_mean": ratio(stats_on["mean_ms"], stats_off["mean_ms"]),
            "audit_records": audit_rows(system)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rng = random.Random(17)
    vocabulary = [f"w{n:04d}" for n in range(WORDS)]
    contents, queries = texts(rng, vocabulary, args.size, 16), texts(rng, vocabulary, args.queries, 3)
    with RunDir("perf_audit", args.out) as run, store_system(args.store, SyntheticEmbedder()) as system:
        fill(system, contents)
        row = {"store": args.store, "memories": args.size, **measure(system, queries, args.rounds, args.k)}
        run.log(row)
        summary = run.summary({"k": args.k, "queries": len(queries), "rounds": args.rounds, "row": row})
    print(rows_text([row], "memory_search with the read audit on vs off"))
    return summary


if __name__ == "__main__":
    main()
