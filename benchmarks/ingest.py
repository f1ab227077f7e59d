"""Stores for benchmarks: a fresh m3 on a temporary SQLite file, filled through the real write path.

Turns become memories with :class:`~m3.protocols.messages.memory.WriteMemories`
sent to the Writer actor in batches (one memory per turn, type
``conversation``, conversation id = session id, valid time = session date,
the turn's index and key in metadata). Vectors come from the Embedder actor
(deferred embedding, as in production); :meth:`ActorSystem.wait_embedded`
returns once every memory has its vector.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.data import Turn
from m3.actors.system import ActorSystem
from m3.config import Config, load_config
from m3.embed.base import Embedder
from m3.protocols.messages.memory import NewMemory, WriteMemories, WriteOutcome

WRITE_BATCH = 256
#: Embedding a cold haystack can take minutes; the default ask timeout is for interactive calls.
EMBED_TIMEOUT_S = 4 * 3600.0


def bench_config(root: Path, **overrides: Any) -> Config:
    """m3's defaults (no config file, no ``M3_*`` variables) with the store at ``root/m3.db``."""
    config = load_config({"M3_HOME": str(root / "home")})
    return config.with_overrides(store__url=f"sqlite:///{root / 'm3.db'}", **overrides)


@contextmanager
def fresh_system(embedder: Embedder, **overrides: Any) -> Iterator[ActorSystem]:
    """A started ActorSystem on an empty store in a temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="m3-bench-") as tmp:
        system = ActorSystem(bench_config(Path(tmp), **overrides), embedder).start()
        try:
            yield system
        finally:
            system.stop(drain_embeddings=False)


STORES = ("sqlite", "postgres")


@contextmanager
def store_url(store: str, root: Path) -> Iterator[str]:
    """A new, empty store of kind ``store`` under ``root``; a PostgreSQL cluster is destroyed afterwards.

    ``postgres`` starts a private embedded PostgreSQL + pgvector cluster (the ``postgres`` extra).
    """
    if store not in STORES:
        raise SystemExit(f"unknown store {store!r} (expected one of {', '.join(STORES)})")
    if store == "sqlite":
        yield f"sqlite:///{root / 'm3.db'}"
        return
    with private_postgres(root, "m3") as url:
        yield url


@contextmanager
def private_postgres(root: Path, database: str) -> Iterator[str]:
    """The URL of an empty database ``database`` on a new embedded PostgreSQL cluster under ``root``, destroyed
    afterwards (the ``postgres`` extra)."""
    from m3.store import embedded_pg, postgres

    cluster = embedded_pg.ensure_cluster(root / "pg" / "data", root / "pg" / "run")
    try:
        postgres.create_database(cluster.url("postgres"), database)
        yield cluster.url(database)
    finally:
        embedded_pg.destroy(cluster.pgdata)


@contextmanager
def store_system(store: str, embedder: Embedder) -> Iterator[ActorSystem]:
    """A started ActorSystem on a new store of kind ``store`` in a temporary directory, all removed afterwards.

    Writes may queue behind the vectors a fast precomputed embedder streams in, so asks wait up to an hour.
    """
    root = Path(tempfile.mkdtemp(prefix=f"m3-bench-{store}-"))
    try:
        with store_url(store, root) as url:
            config = bench_config(root).with_overrides(store__url=url, actors__ask_timeout_s=3600.0)
            system = ActorSystem(config, embedder).start()
            try:
                yield system
            finally:
                system.stop(drain_embeddings=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def analyze(url: str) -> None:
    """On PostgreSQL, ``ANALYZE`` the whole store: what autovacuum does within a minute or so of a bulk write
    (the planner's row estimates, and the word frequencies the keyword leg reads). Nothing on SQLite."""
    from m3.store.engine import StoreOptions, open_engine

    if not url.startswith("postgresql"):
        return
    engine = open_engine(StoreOptions(url=url), "writer")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
    finally:
        engine.dispose()


def turn_memory(turn: Turn) -> NewMemory:
    metadata: dict[str, Any] = {"turn": turn.index, "key": turn.key, "role": turn.role}
    return NewMemory(type="conversation", content=turn.content, metadata=metadata, conversation_id=turn.session_id,
                     valid_from=turn.date)


def write_turns(system: ActorSystem, turns: Sequence[Turn], batch: int = WRITE_BATCH) -> dict[str, Turn]:
    """Write every turn; return memory id -> turn (a turn deduplicated into an earlier one maps to that one)."""
    by_id: dict[str, Turn] = {}
    for start in range(0, len(turns), batch):
        chunk = turns[start : start + batch]
        msg = WriteMemories(memories=tuple(turn_memory(t) for t in chunk), actor="benchmark")
        outcomes: list[WriteOutcome] = system.writer.ask(msg, system.ask_timeout)
        for turn, outcome in zip(chunk, outcomes, strict=True):
            by_id.setdefault(outcome.id, turn)
    return by_id


def ingest(system: ActorSystem, turns: Sequence[Turn]) -> dict[str, Turn]:
    """Write the turns and wait until every one of them is embedded."""
    by_id = write_turns(system, turns)
    system.wait_embedded(EMBED_TIMEOUT_S)
    return by_id
