"""Driving a loop pass as the loop actor will (that actor lives on another branch): ``step()`` inside a read
transaction on a connection of our own, then its writes sent to the real Writer, in order."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from m3.actors.supervisor import ActorHandle
from m3.cognition.passes import LoopPass, PassContext, PassStep
from m3.store.engine import StoreOptions, open_engine
from m3.store.loop_state import watermark

WAIT_S = 30.0


@dataclass
class Tick:
    step: PassStep
    replies: list[Any]
    produced: int


class Driver:
    """One pass, a read engine of its own and the Writer its requests go to."""

    def __init__(self, loop_pass: LoopPass, options: StoreOptions, writer: ActorHandle):
        self.loop_pass, self.writer = loop_pass, writer
        self.engine: Engine = open_engine(options, "reader")

    def tick(self, now: datetime, budget: int = 1000, settings: Mapping[str, Any] | None = None) -> Tick:
        with self.engine.connect() as conn, conn.begin():
            step = self.loop_pass.step(conn, PassContext(now=now, budget=budget, settings=dict(settings or {})))
        replies = [self.writer.ask(request, WAIT_S) for request in step.writes]
        return Tick(step, replies, self.loop_pass.produced(replies))

    def sweep(self, now: datetime, budget: int = 1000, settings: Mapping[str, Any] | None = None,
              most: int = 1000) -> Iterator[Tick]:
        """Ticks at ``now`` until one reports no more work (at most ``most``)."""
        for _ in range(most):
            done = self.tick(now, budget, settings)
            yield done
            if not done.step.more:
                return
        raise AssertionError(f"the pass still had more to do after {most} ticks")

    def watermark(self) -> Any:
        with self.engine.connect() as conn, conn.begin():
            return watermark(conn, self.loop_pass.name)

    def close(self) -> None:
        self.engine.dispose()
