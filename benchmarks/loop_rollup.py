"""CPU seconds of the belief roll-up pass per 1,000 new notes (docs/benchmarks.md, docs/cognitive-loop.md).

``python -m benchmarks.loop_rollup [--notes 1000] [--owners 10] [--budget 500] [--url URL]``: writes synthetic
notes (half of them about a few recurring topics per owner, half unrelated) through the real Writer into a
fresh store (a temporary SQLite file unless ``--url``), embeds them with the offline model and stores the
vectors through the Writer, as the Embedder does. Then it runs ticks of the pass as the loop actor will — step()
in a read transaction, its CommitRollup to the Writer — until a tick sees nothing new, embedding each tick's
beliefs like any write. Reported per phase: the pass's own CPU (step: reads, clustering, text), the Writer's
commit, and the embedding of the beliefs; and all three per 1,000 notes. Note embedding is not counted: it is
the cost of the writes, not of the pass. Run it niced on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from m3.actors.supervisor import ActorHandle
from m3.actors.writer import Writer
from m3.cognition.passes import PassContext
from m3.cognition.rollup import RollupPass
from m3.embed.minilm import MiniLMEmbedder
from m3.protocols.messages.memory import ActivateModel, NewMemory, StoreVectors, WriteMemories
from m3.protocols.messages.rollup import RollupWritten
from m3.retrieval.supersession import SupersessionPolicy
from m3.store.engine import StoreOptions, migrate_store, open_engine

TIMEOUT_S = 600.0
TOPICS = (
    ("deploys", "Production deploys go out on {day} after the staging checks pass ({n})."),
    ("standup", "The team stand-up is at {hour} every morning in the {room} room ({n})."),
    ("coffee", "I like my coffee as a flat white with oat milk, no sugar ({n})."),
    ("backups", "Database backups run nightly at {hour} and are kept for {k} days ({n})."),
    ("travel", "Flights to the Berlin office are booked through the travel desk two weeks ahead ({n})."),
    ("reviews", "Every pull request needs two approving code reviews before merging ({n})."),
)
DAYS, HOURS, ROOMS = ("Friday", "Thursday", "Tuesday"), ("9:00", "9:30", "10:00"), ("blue", "green", "north")
WORDS = ("garden", "invoice", "piano", "harbour", "ticket", "lantern", "recipe", "bicycle", "meadow", "glacier",
         "violin", "parcel", "canyon", "orchard", "compass", "kettle", "mosaic", "tunnel", "saddle", "beacon")


def notes_for(count: int, owners: int, seed: int) -> list[NewMemory]:
    """``count`` notes spread over ``owners`` agents: every other one on a recurring topic, the rest unrelated."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if i % 2 == 0:
            _, template = TOPICS[rng.randrange(len(TOPICS))]
            text = template.format(day=rng.choice(DAYS), hour=rng.choice(HOURS), room=rng.choice(ROOMS),
                                   k=rng.randrange(7, 60), n=i)
        else:
            text = f"Remember the {' '.join(rng.sample(WORDS, 4))} item number {i}."
        out.append(NewMemory(type="note", content=text, agent_id=f"agent-{i % owners}"))
    return out


def _embed_and_store(writer: ActorHandle, model: MiniLMEmbedder, ids: list[str], texts: list[str]) -> float:
    """Embed ``texts`` here and store the vectors through the Writer; the CPU seconds of the embedding (the
    process's: onnxruntime computes on threads of its own, and nothing else runs meanwhile)."""
    begun = time.process_time()
    vectors = np.vstack([np.asarray(model.embed(texts[i:i + 32]), dtype="<f4") for i in range(0, len(texts), 32)])
    spent = time.process_time() - begun
    writer.ask(StoreVectors(model=model.model_id, dim=model.dim, ids=tuple(ids), vectors=vectors.tobytes()),
               TIMEOUT_S)
    return spent


def run(url: str, notes: int, owners: int, budget: int, seed: int) -> dict[str, Any]:
    options = StoreOptions(url=url)
    migrate_store(options)
    model = MiniLMEmbedder()
    model.load()
    writer = ActorHandle("writer", Writer, options, max_batch=256,
                         policy=SupersessionPolicy(threshold=0.92, exempt_types=frozenset({"belief"})),
                         searcher=None, embedder=None).start()
    try:
        batch = notes_for(notes, owners, seed)
        written = writer.ask(WriteMemories(memories=tuple(batch), actor="bench"), TIMEOUT_S)
        _embed_and_store(writer, model, [w.id for w in written], [m.content for m in batch])
        writer.ask(ActivateModel(model=model.model_id, dim=model.dim), TIMEOUT_S)
        return _ticks(writer, model, options, budget) | {"notes": notes, "owners": owners, "budget": budget}
    finally:
        writer.stop(timeout=TIMEOUT_S)


def _ticks(writer: ActorHandle, model: MiniLMEmbedder, options: StoreOptions, budget: int) -> dict[str, Any]:
    rollup, engine = RollupPass(), open_engine(options, "reader")
    cpu = {"step": 0.0, "commit": 0.0, "embed_beliefs": 0.0}
    ticks = beliefs = 0
    begun_wall = time.perf_counter()
    try:
        while True:
            with engine.connect() as conn, conn.begin():
                began = time.process_time()
                step = rollup.step(conn, PassContext(now=datetime.now(UTC), budget=budget))
                cpu["step"] += time.process_time() - began
            if step.seen == 0:
                break
            ticks += 1
            # CPU of the whole process: the commit runs on the Writer's thread while this one waits.
            began = time.process_time()
            replies = [writer.ask(w, TIMEOUT_S) for w in step.writes]
            cpu["commit"] += time.process_time() - began
            beliefs += rollup.produced(replies)
            done = [r for r in replies if isinstance(r, RollupWritten)]
            assert not any(r.skipped for r in done), "nothing changes the notes meanwhile"
            created = [i for r in done for i in r.created]
            texts = [f"{b.title}\n{b.content}" for w in step.writes for b in getattr(w, "beliefs", ())]
            if created:
                cpu["embed_beliefs"] += _embed_and_store(writer, model, created, texts)
    finally:
        engine.dispose()
    total = sum(cpu.values())
    return {"ticks": ticks, "beliefs": beliefs, "wall_s": round(time.perf_counter() - begun_wall, 3),
            "cpu_s": {k: round(v, 3) for k, v in cpu.items()}, "cpu_total_s": round(total, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--owners", type=int, default=10)
    parser.add_argument("--budget", type=int, default=500, help="vectors one tick looks at (PassContext.budget)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--url", default="", help="SQLAlchemy URL of an empty store; default a temporary SQLite")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'rollup.db'}"
        result = run(url, args.notes, args.owners, args.budget, args.seed)
    per = 1000.0 / max(1, result["notes"])
    result["cpu_per_1000_notes_s"] = {k: round(v * per, 3) for k, v in result["cpu_s"].items()}
    result["cpu_total_per_1000_notes_s"] = round(result["cpu_total_s"] * per, 3)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
