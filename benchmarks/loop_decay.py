"""The decay pass's cost, and what archived memories cost search.

``python -m benchmarks.loop_decay [--memories 10000] [--store sqlite|postgres] [--budget 1000]
[--archived-share 0.5] [--queries 50]``: a new store (temporary SQLite file or private embedded PostgreSQL)
is filled through the Writer with ``--memories`` notes of pseudo-random words; ``--archived-share`` of them
have importance 0.01, the rest 0.9. Vectors come through the Embedder actor from the embedding cache, a
text missing from it getting a pseudo-random unit vector (brute-force and HNSW costs do not depend on the
values); queries are embedded the same way, so search times leave the model out.

Then, as the loop actor will: a full sweep of the decay pass (ticks of ``--budget`` memories, ``step()`` in a
read transaction, its request to the Writer) at a time where nothing has decayed (cost of reading and
deciding), and one 60 days later, where the low-importance share is archived (cost of archiving too). Each
reports the process CPU seconds (every thread: the Writer's too) and wall seconds per 1,000 memories. Search
latency (k=8, p50/p95 over ``--queries`` queries, and the mean process CPU per search) is measured before any
memory is archived and after.
The entity indexer is off so that only the pass runs. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.embedding import cached_embedder
from benchmarks.ingest import EMBED_TIMEOUT_S, STORES, bench_config, store_url
from benchmarks.latency import percentiles_ms
from benchmarks.precomputed import PrecomputedEmbedder
from m3.actors.system import ActorSystem
from m3.cognition.decay import DecayPass
from m3.cognition.passes import PassContext
from m3.protocols.messages.memory import MemoryFilter, NewMemory, SearchMemories, WriteMemories
from m3.store.engine import open_engine

FILL_BATCH = 1000
WARMUP_QUERIES = 3
VOCABULARY = 3000


def words(rng: random.Random) -> list[str]:
    """A fixed vocabulary of pronounceable pseudo-words."""
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "pe", "da", "go", "zu", "fi", "ho", "ja"]
    out: set[str] = set()
    while len(out) < VOCABULARY:
        out.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(out)


@contextmanager
def bench_system(store: str, cache: Path | None) -> Iterator[ActorSystem]:
    with tempfile.TemporaryDirectory(prefix="m3-bench-decay-") as tmp, store_url(store, Path(tmp)) as url:
        config = bench_config(Path(tmp)).with_overrides(store__url=url, actors__ask_timeout_s=3600.0,
                                                         entities__enabled=False)
        system = ActorSystem(config, PrecomputedEmbedder(cached_embedder(cache))).start()
        try:
            yield system
        finally:
            system.stop(drain_embeddings=False)


def fill(system: ActorSystem, n: int, share: float, vocab: list[str], rng: random.Random) -> None:
    for start in range(0, n, FILL_BATCH):
        batch = tuple(NewMemory(type="note", content=f"Note {i}: " + " ".join(rng.choices(vocab, k=12)) + ".",
                                importance=0.01 if rng.random() < share else 0.9)
                      for i in range(start, min(n, start + FILL_BATCH)))
        system.writer.ask(WriteMemories(memories=batch, actor="bench"), EMBED_TIMEOUT_S)
    system.wait_embedded(EMBED_TIMEOUT_S)


def sweep(system: ActorSystem, now: datetime, budget: int) -> dict[str, Any]:
    """One full sweep of the decay pass at ``now``; its cost."""
    decay, engine = DecayPass(), open_engine(system.options, "reader")
    cpu, wall = time.process_time(), time.perf_counter()
    ticks = seen = archived = 0
    try:
        while True:
            with engine.connect() as conn, conn.begin():
                step = decay.step(conn, PassContext(now=now, budget=budget))
            replies = [system.writer.ask(request, EMBED_TIMEOUT_S) for request in step.writes]
            ticks, seen, archived = ticks + 1, seen + step.seen, archived + decay.produced(replies)
            if not step.more:
                break
    finally:
        engine.dispose()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    per = max(seen, 1) / 1000
    return {"ticks": ticks, "seen": seen, "archived": archived, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "cpu_s_per_1000": round(cpu / per, 4), "wall_s_per_1000": round(wall / per, 4)}


def latency(system: ActorSystem, queries: list[str]) -> dict[str, float]:
    """Wall percentiles of one search, and its mean process CPU (steadier than wall on a shared machine)."""
    for q in queries[:WARMUP_QUERIES]:
        system.searcher.ask(SearchMemories(query=q, k=8, filter=MemoryFilter()), EMBED_TIMEOUT_S)
    took = []
    cpu = time.process_time()
    for q in queries:
        begun = time.perf_counter()
        system.searcher.ask(SearchMemories(query=q, k=8, filter=MemoryFilter()), EMBED_TIMEOUT_S)
        took.append(time.perf_counter() - begun)
    cpu_ms = (time.process_time() - cpu) * 1000 / max(len(queries), 1)
    return {**percentiles_ms(took), "cpu_ms_mean": round(cpu_ms, 3)}


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """The figures (see the module docstring) as one dict."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--archived-share", type=float, default=0.5)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--cache", type=Path, default=None, help="Embedding cache (default: the benchmarks' own).")
    args = parser.parse_args(argv)
    rng = random.Random(15)
    vocab = words(rng)
    queries = [" ".join(rng.choices(vocab, k=3)) for _ in range(args.queries)]
    with bench_system(args.store, args.cache) as system:
        fill(system, args.memories, args.archived_share, vocab, rng)
        now = datetime.now(UTC)
        before = latency(system, queries)
        nothing = sweep(system, now + timedelta(days=1), args.budget)
        archiving = sweep(system, now + timedelta(days=60), args.budget)
        after = latency(system, queries)
    return {
        "store": args.store, "memories": args.memories, "budget": args.budget, "archived_share": args.archived_share,
        "sweep_nothing_to_archive": nothing, "sweep_archiving": archiving,
        "search_ms_none_archived": before, "search_ms_after_archiving": after,
    }


def main(argv: list[str] | None = None) -> int:
    print(json.dumps(run(argv), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
