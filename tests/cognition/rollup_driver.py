"""Driving the roll-up pass as the loop actor will: ``step()`` in a read transaction, its writes to the Writer.

The loop actor is built on another branch; until it is merged the tests run a tick themselves. After the
Writer's replies, every new belief is embedded (the Embedder and Writer are flushed), so the next tick and
memory_search see it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from m3.actors.system import ActorSystem
from m3.cognition.passes import ChatModel, PassContext, PassStep
from m3.cognition.rollup import RollupPass
from m3.store.engine import StoreOptions, open_engine

WAIT_S = 60.0
#: Settings the tests use: the defaults, unless a test says otherwise.
SETTINGS: dict[str, Any] = {}


def tick(system: ActorSystem, budget: int = 500, settings: Mapping[str, Any] | None = None,
         llm: ChatModel | None = None, llm_calls: int = 0) -> tuple[PassStep, int]:
    """One tick of the pass on ``system``'s store (with ``llm``, at most ``llm_calls`` model calls): (what it
    decided, beliefs written)."""
    system.wait_embedded(WAIT_S)
    engine = open_engine(StoreOptions(url=system.options.url), "reader")
    rollup = RollupPass()
    try:
        with engine.connect() as conn, conn.begin():
            step = rollup.step(conn, PassContext(now=datetime.now(UTC), budget=budget, llm=llm, llm_calls=llm_calls,
                                                 settings=dict(settings if settings is not None else SETTINGS)))
    finally:
        engine.dispose()
    replies = [system.writer.ask(write, WAIT_S) for write in step.writes]
    system.wait_embedded(WAIT_S)
    return step, rollup.produced(replies)


def run_until_idle(system: ActorSystem, budget: int = 500, settings: Mapping[str, Any] | None = None,
                   max_ticks: int = 20) -> int:
    """Ticks until one sees nothing new (the beliefs' own vectors included); beliefs written in all."""
    written = 0
    for _ in range(max_ticks):
        step, produced = tick(system, budget, settings)
        written += produced
        if step.seen == 0:
            return written
    raise AssertionError(f"the roll-up pass still saw new vectors after {max_ticks} ticks")
