"""Small real passes of the cognitive loop for the tests: they read the store and write through the Writer.

:class:`TallyPass` reads the notes written after its ``loop_state`` watermark (at most its budget), writes one
summary memory counting them and moves its watermark, both in the step's one commit. :class:`BrokenPass` fails
while its ``failing`` event is set. :class:`HandTicker` is a ticker the test fires.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Connection, select

from m3.cognition.passes import PassContext, PassStep
from m3.protocols.messages.loop import MoveWatermark
from m3.protocols.messages.memory import NewMemory, SupersedeMemory, WriteMemories
from m3.store import loop_state
from m3.store.schema import memories as m


class TallyPass:
    """Counts new notes in a summary memory; the summary's ``metadata.seqs`` names the notes it counted."""

    name: ClassVar[str] = "tally"

    def __init__(self) -> None:
        #: Per step: (items seen, ctx.now, ctx.budget); written by the loop actor's thread only.
        self.steps: list[tuple[int, datetime, int]] = []

    def step(self, conn: Connection, ctx: PassContext) -> PassStep:
        after = int(loop_state.watermark(conn, self.name, {}).get("seq", 0))
        seqs = [int(seq) for seq in conn.execute(
            select(m.c.seq).where(m.c.seq > after, m.c.type == "note").order_by(m.c.seq).limit(ctx.budget + 1)
        ).scalars()]
        page, more = seqs[:ctx.budget], len(seqs) > ctx.budget
        self.steps.append((len(page), ctx.now, ctx.budget))
        if not page:
            return PassStep(seen=0)
        summary = NewMemory(type="summary", scope="org", content=f"tally: {len(page)} notes up to {page[-1]}",
                            metadata={"seqs": page})
        return PassStep(seen=len(page), more=more,
                        writes=(WriteMemories(memories=(summary,), actor="loop:tally"),
                                MoveWatermark(name=self.name, watermark={"seq": page[-1]})))

    def produced(self, replies: Sequence[Any]) -> int:
        return sum(1 for outcome in replies[0] if outcome.created) if replies else 0


class BrokenPass:
    """Raises while ``failing`` is set; otherwise sees nothing."""

    name: ClassVar[str] = "broken"

    def __init__(self) -> None:
        self.failing = threading.Event()
        self.failing.set()
        self.steps = 0

    def step(self, conn: Connection, ctx: PassContext) -> PassStep:
        self.steps += 1
        if self.failing.is_set():
            raise RuntimeError("the broken pass broke")
        return PassStep(seen=0)

    def produced(self, replies: Sequence[Any]) -> int:
        return 0


class RefusedPass:
    """Writes a summary, then a change the Writer refuses (no such memory), then its watermark: all or nothing."""

    name: ClassVar[str] = "refused"

    def step(self, conn: Connection, ctx: PassContext) -> PassStep:
        summary = NewMemory(type="summary", scope="org", content="refused: never committed")
        return PassStep(seen=1, writes=(
            WriteMemories(memories=(summary,), actor="loop:refused"),
            SupersedeMemory(id="00000000-0000-4000-8000-000000000000", content="new text", actor="loop:refused"),
            MoveWatermark(name=self.name, watermark={"seq": 1})))

    def produced(self, replies: Sequence[Any]) -> int:
        return len(replies)


class HandTicker:
    """A ticker the test fires: ``armed`` is set while the loop has armed it."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self._fire: Callable[[], None] | None = None

    def arm(self, delay_s: float, fire: Callable[[], None]) -> None:
        self._fire = fire
        self.armed.set()

    def cancel(self) -> None:
        self._fire = None
        self.armed.clear()

    def fire(self) -> None:
        assert self._fire is not None, "the loop did not arm its ticker"
        fire, self._fire = self._fire, None
        self.armed.clear()
        fire()
