"""The contract between the cognitive loop's actors (``m3/actors/loop*.py``) and its passes (this package).

A pass is pure logic over the store: on each tick the loop actor opens a read transaction on its own
connection and calls :meth:`LoopPass.step`, which reads what is new since the pass's watermark
(:mod:`m3.store.loop_state`), decides, and returns the Writer requests that commit its work *and* move its
watermark in the same transaction. The actor sends them to the Writer in order and counts what came back with
:meth:`LoopPass.produced`. A pass never writes itself, never deletes a row, never rewrites a user's text, and
never sleeps: time is ``ctx.now`` (the loop's injectable clock).

A chat model is optional: ``ctx.llm`` is None unless ``llm.url`` is configured, and every pass has a
deterministic fallback. ``ctx.llm_calls`` bounds the model calls of one tick (the per-tick cost bound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Protocol

from sqlalchemy import Connection

from m3.protocols.base import Message

#: The passes, in the order one tick of the loop runs them.
PASS_NAMES = ("observe", "reflect", "decay", "rollup")


class ChatModel(Protocol):
    """An OpenAI-compatible chat completions endpoint (``m3.cognition.llm``)."""

    def complete_json(self, system: str, user: str, *, schema_hint: str = "") -> Any:
        """The model's answer parsed as JSON (JSON mode); an ``M3Error`` (code ``llm_error``) when the
        endpoint fails, times out after its retries, or answers something that is not JSON."""
        ...


@dataclass(frozen=True)
class PassContext:
    """What one tick gives a pass."""

    now: datetime
    #: The most items (memories, chat turns, pairs) the pass looks at in this tick.
    budget: int
    #: The configured model, or None (deterministic fallback).
    llm: ChatModel | None = None
    #: The most model calls this tick may make (0 when there is no model).
    llm_calls: int = 0
    #: This pass's own settings (``loop.<pass>.*`` without the prefix).
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PassStep:
    """What a tick of a pass decided."""

    #: Items looked at.
    seen: int
    #: Writer requests, sent in order; the last of them moves the watermark (it may be the only one).
    writes: Sequence[Message] = ()
    #: More is waiting beyond the budget: the loop runs the pass again soon instead of at the next interval.
    more: bool = False
    #: Model calls made.
    llm_calls: int = 0


class LoopPass(Protocol):
    """One pass of the cognitive loop."""

    name: ClassVar[str]

    def step(self, conn: Connection, ctx: PassContext) -> PassStep:
        """Read (inside the caller's read transaction on ``conn``) and decide one tick's work."""
        ...

    def produced(self, replies: Sequence[Any]) -> int:
        """How many items the Writer's ``replies`` (one per request of :attr:`PassStep.writes`) produced."""
        ...
