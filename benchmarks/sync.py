"""Warehouse sync throughput: rows/s pushed and pulled, and an incremental sync of 1,000 new memories.

``python -m benchmarks.sync [--memories 100000] [--increment 1000]``: two nodes, each an m3 engine
(``ActorSystem``) over its own temporary SQLite file, share a warehouse, an empty database of a private embedded
PostgreSQL cluster (durable default settings, Unix socket; ``--warehouse URL`` names an existing empty database
instead). Then:

1. node A is filled with ``--memories`` distinct LongMemEval_S turns (one memory per turn, type ``conversation``,
   ``WriteMemories`` to the Writer in batches of 1000, as perf_search fills). Vectors take the real path (Embedder
   actor, ``StoreVectors``) but are looked up, not computed: the embedding cache's MiniLM vector of the text, or a
   pseudo-random unit vector of the same model and dimension (the counts are printed). ``--source generated``
   writes numbered synthetic sentences instead (the tests' choice: CI has no copy of the data);
2. A's first sync (``RunSync``): every row A holds is pushed (memories, their vectors, their history lines...);
   the run then pulls the warehouse's changes, A's own rows coming back as echoes;
3. B's first sync: B, empty, pulls everything;
4. A writes ``--increment`` more memories and syncs (an incremental push), then B syncs (an incremental pull).

Each run's counts and bytes are the ``SyncReport``'s (bytes = the JSON size of the rows sent or received, not
PostgreSQL's wire bytes); push and pull seconds are timed around the Sync actor's push and pull steps, and a
second table splits each run into its parts (each Writer request by type, each warehouse call). After the
last run the benchmark checks that A and B hold the same number of rows in every synced table and that the
warehouse holds as many live rows as A (it exits non-zero otherwise).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, select
from sqlalchemy.pool import NullPool

from benchmarks.data import Turn, default_data_dir
from benchmarks.embedding import cached_embedder, default_cache_path, describe
from benchmarks.ingest import private_postgres, write_turns
from benchmarks.perf_search import corpus
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.progress import Progress
from benchmarks.report import RunDir
from m3.actors.sync import SyncActor
from m3.actors.system import ActorSystem
from m3.config import load_config
from m3.embed.base import Embedder
from m3.protocols.messages.sync import RunSync, SyncReport
from m3.store import sync_reads
from m3.store.sync_tables import SYNCED
from m3.store.warehouse import Warehouse

FILL_BATCH = 1000
#: A first sync of a large store is one long ask.
SYNC_TIMEOUT_S = 4 * 3600.0
MB = 1_000_000


def generated_turns(n: int) -> list[Turn]:
    """``n`` distinct synthetic turns (numbered sentences), 20 per session."""
    topics = ("garden", "train trip", "piano lessons", "new job", "cat food", "brake pads", "book club", "recipe")
    return [Turn(session_id=f"gen-{i // 20}", index=i % 20, key=f"gen-{i // 20}:{i % 20}",
                 role="user" if i % 2 == 0 else "assistant",
                 content=f"Note {i}: about the {topics[i % len(topics)]}, item {i * 7919 % 100003} was settled "
                         f"on day {i % 365} after {i % 17} calls.", date=None)
            for i in range(n)]


class Node:
    """One machine: an engine over its own SQLite file, syncing with the shared warehouse."""

    def __init__(self, root: Path, name: str, warehouse_url: str, embedder: Embedder, batch: int | None):
        home = root / name
        env = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
        env.update({"M3_HOME": str(home), "M3_STORE_URL": f"sqlite:///{home / 'm3.db'}",
                    "M3_SYNC_WAREHOUSE_URL": warehouse_url, "M3_IDENTITY_AGENT_ID": name,
                    "M3_ACTORS_ASK_TIMEOUT_S": str(SYNC_TIMEOUT_S)})
        if batch is not None:
            env["M3_SYNC_BATCH"] = str(batch)
        self.name = name
        self.url = env["M3_STORE_URL"]
        self.system = ActorSystem(load_config(env), embedder, background=False).start()

    def sync(self) -> SyncReport:
        report: SyncReport = self.system.sync.ask(RunSync(trigger="benchmark"), SYNC_TIMEOUT_S)
        return report

    def counts(self) -> dict[str, int]:
        """Rows per synced table."""
        engine = create_engine(self.url, poolclass=NullPool)
        try:
            with engine.connect() as conn:
                return {s.name: int(conn.execute(select(func.count()).select_from(s.table)).scalar_one())
                        for s in SYNCED}
        finally:
            engine.dispose()

    def stop(self) -> None:
        self.system.stop(drain_embeddings=False)


class PhaseClock:
    """Seconds per run in the Sync actor's push and pull steps and in the calls they make (each Writer request by
    its type, each warehouse call, the outbox reads): timers wrapped around those methods while installed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def reset(self) -> None:
        self.seconds = {}

    @contextmanager
    def installed(self) -> Iterator[PhaseClock]:
        targets: list[tuple[Any, str, Callable[[tuple[Any, ...]], str]]] = [
            (SyncActor, "_push", lambda _: "push"), (SyncActor, "_pull", lambda _: "pull"),
            (SyncActor, "_ask", lambda args: "writer " + type(args[1]).__name__),
            (sync_reads, "outbox_batch", lambda _: "outbox reads"),
            *((Warehouse, name, lambda _, name=name: f"warehouse {name}") for name in ("push", "pull", "fetch"))]
        saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
        for (owner, name, label), (_, _, original) in zip(targets, saved, strict=True):
            setattr(owner, name, self._timed(original, label))
        try:
            yield self
        finally:
            for owner, name, original in saved:
                setattr(owner, name, original)

    def _timed(self, original: Callable[..., Any], label: Callable[[tuple[Any, ...]], str]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                key = label(args)
                self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - started
        return run


def fill(node: Node, turns: list[Turn]) -> float:
    """Write ``turns`` as memories and wait for every vector; seconds."""
    started = time.perf_counter()
    bar = Progress(f"fill {node.name}", len(turns))
    for start in range(0, len(turns), FILL_BATCH):
        chunk = turns[start : start + FILL_BATCH]
        write_turns(node.system, chunk, batch=FILL_BATCH)
        bar.update(len(chunk))
    bar.close()
    node.system.wait_embedded(SYNC_TIMEOUT_S)
    return time.perf_counter() - started


def timed_sync(node: Node, clock: PhaseClock, step: str, memories: int) -> dict[str, Any]:
    clock.reset()
    report = node.sync()
    spent = dict(clock.seconds)
    push_s, pull_s = spent.get("push", 0.0), spent.get("pull", 0.0)
    return {"step": step, "memories": memories, "pushed": report["pushed"], "pulled": report["pulled"],
            "conflicts": report["conflicts"], "sync_s": report["seconds"], "push_s": round(push_s, 2),
            "pull_s": round(pull_s, 2), "push_rows_s": _rate(report["pushed"], push_s),
            "pull_rows_s": _rate(report["pulled"], pull_s), "sent_mb": round(report["bytes_sent"] / MB, 2),
            "received_mb": round(report["bytes_received"] / MB, 2),
            "sent_mb_s": _rate(report["bytes_sent"] / MB, push_s, 2),
            "received_mb_s": _rate(report["bytes_received"] / MB, pull_s, 2),
            "bytes_sent": report["bytes_sent"], "bytes_received": report["bytes_received"],
            "breakdown": {key: round(spent.get(key, 0.0), 2) for key, _ in BREAKDOWN}}


def _rate(amount: float, seconds: float, digits: int = 0) -> float:
    return round(amount / seconds, digits) if seconds > 0 and amount else 0.0


def warehouse_counts(url: str) -> dict[str, int]:
    """Live rows per table in the warehouse."""
    wh = Warehouse(url)
    try:
        return {tbl: len(found) for tbl, found in wh.dump().items()}
    finally:
        wh.close()


def run(warehouse_url: str, embedder: Embedder, turns: list[Turn], *, memories: int, increment: int,
        batch: int | None, root: Path) -> dict[str, Any]:
    """Fill A with ``turns[:memories]``, sync A then B, add ``turns[memories:]`` to A, sync A then B; the rows
    of the four runs, the fill time and the final row counts. Raises SystemExit when the nodes disagree."""
    assert len(turns) == memories + increment
    a, b = Node(root, "a", warehouse_url, embedder, batch), None
    try:
        b = Node(root, "b", warehouse_url, embedder, batch)
        batch = int(a.system.config["sync.batch"])
        with PhaseClock().installed() as clock:
            fill_s = fill(a, turns[:memories])
            rows = [timed_sync(a, clock, "A first sync (push all)", memories),
                    timed_sync(b, clock, "B first sync (pull all)", memories)]
            started = time.perf_counter()
            fill(a, turns[memories:])
            increment_fill_s = time.perf_counter() - started
            rows += [timed_sync(a, clock, f"A sync after {increment} new", memories + increment),
                     timed_sync(b, clock, f"B sync after {increment} new", memories + increment)]
        counts = {"a": a.counts(), "b": b.counts(), "warehouse": warehouse_counts(warehouse_url)}
    finally:
        a.stop()
        if b is not None:
            b.stop()
    mismatch = {t: (n, counts["b"][t], counts["warehouse"].get(t, 0)) for t, n in counts["a"].items()
                if (n, n) != (counts["b"][t], counts["warehouse"].get(t, 0))}
    return {"batch": batch, "fill_s": round(fill_s, 1), "increment_fill_s": round(increment_fill_s, 1), "runs": rows,
            "counts": counts, "mismatch": mismatch}


COLUMNS = [("step", "step"), ("memories", "memories in A"), ("pushed", "rows pushed"), ("pulled", "rows pulled"),
           ("sync_s", "run s"), ("push_s", "push s"), ("pull_s", "pull s"), ("push_rows_s", "push rows/s"),
           ("pull_rows_s", "pull rows/s"), ("sent_mb", "sent MB"), ("sent_mb_s", "sent MB/s"),
           ("received_mb", "received MB"), ("received_mb_s", "received MB/s")]


#: Where a run's seconds go (PhaseClock keys): the push step's parts, then the pull step's.
BREAKDOWN = [("writer StageChanges", "stage (Writer)"), ("outbox reads", "outbox reads"),
             ("warehouse push", "warehouse push"), ("writer ConfirmPush", "confirm (Writer)"),
             ("warehouse pull", "warehouse pull"), ("warehouse fetch", "parents fetched"),
             ("writer ApplyPulled", "apply (Writer)"), ("writer SettlePulled", "settle (Writer)")]


def markdown_table(rows: list[dict[str, Any]], columns: list[tuple[str, str]] | None = None) -> str:
    columns = columns or COLUMNS
    head = "| " + " | ".join(title for _, title in columns) + " |"
    rule = "|" + "|".join("---" if key == "step" else "---:" for key, _ in columns) + "|"
    body = ["| " + " | ".join(_cell(row[key]) for key, _ in columns) + " |" for row in rows]
    return "\n".join([head, rule, *body])


def breakdown_table(rows: list[dict[str, Any]]) -> str:
    """Seconds per part of each run."""
    flat = [{"step": row["step"], "sync_s": row["sync_s"], **row["breakdown"]} for row in rows]
    return markdown_table(flat, [("step", "step"), ("sync_s", "run s"), *((k, f"{t} s") for k, t in BREAKDOWN)])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000, help="memories in A before its first sync")
    parser.add_argument("--increment", type=int, default=1000, help="memories A writes before the incremental sync")
    parser.add_argument("--batch", type=int, default=None, help="rows per sync batch (default: sync.batch)")
    parser.add_argument("--source", choices=["s", "generated"], default="s",
                        help="LongMemEval_S turns, or generated sentences (no data needed)")
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    parser.add_argument("--warehouse", default=None, help="an existing empty PostgreSQL database (default: a new "
                                                          "embedded cluster)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.memories < 1 or args.increment < 1:
        raise SystemExit("--memories and --increment must be at least 1")
    total = args.memories + args.increment
    turns = generated_turns(total) if args.source == "generated" else corpus(args.data, total, 0)[0]
    cache = cached_embedder(args.cache)
    vectors = PrecomputedEmbedder(cache)
    root = Path(tempfile.mkdtemp(prefix="m3-bench-sync-"))
    try:
        with RunDir("sync", args.out) as out:
            load_before = os.getloadavg()
            if args.warehouse:
                result = run(args.warehouse, vectors, turns, memories=args.memories, increment=args.increment,
                             batch=args.batch, root=root)
            else:
                with private_postgres(root, "warehouse") as url:
                    result = run(url, vectors, turns, memories=args.memories, increment=args.increment,
                                 batch=args.batch, root=root)
            for row in result["runs"]:
                out.log(row)
            summary = out.summary({"memories": args.memories, "increment": args.increment,
                                   "source": args.source, "embedder": describe(cache),
                                   "vectors": {"from_cache": vectors.cached, "synthetic": vectors.synthetic},
                                   "load_before": load_before, "date": datetime.now(UTC).date().isoformat(),
                                   **result})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{summary['command']}\n")
    print(markdown_table(summary["runs"]))
    print("\nseconds per part of each run:\n")
    print(breakdown_table(summary["runs"]))
    print(f"\nfill of A: {args.memories} memories in {result['fill_s']} s; +{args.increment} in "
          f"{result['increment_fill_s']} s. Vectors: {vectors.cached} from the embedding cache, {vectors.synthetic} "
          f"synthetic ({cache.model_id}, {cache.dim} d). Sync batch {result['batch']} rows. Load average before "
          f"{tuple(round(x, 2) for x in load_before)}, after {tuple(round(x, 2) for x in os.getloadavg())}.")
    print("rows per table (A, B, warehouse): " + ", ".join(
        f"{t} {n}/{result['counts']['b'][t]}/{result['counts']['warehouse'].get(t, 0)}"
        for t, n in result["counts"]["a"].items() if n or result["counts"]["b"][t]))
    print(f"results: {out.path}")
    if result["mismatch"]:
        raise SystemExit(f"the nodes and the warehouse disagree: {result['mismatch']}")
    return summary


if __name__ == "__main__":
    main()
