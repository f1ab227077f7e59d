"""Messages of the cognitive loop (docs/cognitive-loop.md): the Writer requests its passes and tools send, and
the requests the loop actors (``m3/actors/loop.py``) answer.

Writer requests: :class:`CommitPass` (one pass step's writes, applied in order in one transaction),
:class:`MoveWatermark` (a pass's last write) and :class:`SetPassesPaused` (pause and resume, kept in
``loop_state`` across restarts). Loop actor requests: :class:`RunPassesOnce` and :class:`LoopStatusOf`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, JsonValue, SerializeAsAny, field_validator

from m3.protocols.base import Message, Request

#: What a pass name looks like (``loop_state.name``; also a settings key ``loop.<name>.*``).
PASS_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def _named(name: str) -> str:
    if not PASS_NAME.match(name):
        raise ValueError(f"{name!r} is not a pass name (lower-case letters, digits and _, at most 40)")
    return name


class MoveWatermark(Request[None]):
    """Writer: set pass ``name``'s watermark to ``watermark`` (JSON), in the transaction of the writes before it."""

    name: str
    watermark: JsonValue

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return _named(name)


class SetPassesPaused(Request[None]):
    """Writer: pause (``paused``) or resume each pass of ``names``; kept in ``loop_state`` across restarts."""

    names: tuple[str, ...] = Field(min_length=1)
    paused: bool

    @field_validator("names")
    @classmethod
    def _names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_named(n) for n in names)


class CommitPass(Request[list[Any]]):
    """Writer: the requests of one step of pass ``name``, applied in order in one transaction (all or none);
    the reply lists each request's own reply, in order. Only requests the Writer commits (its ``OPERATIONS``)
    may be given, and no :class:`CommitPass` inside another."""

    name: str
    writes: tuple[SerializeAsAny[Message], ...] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return _named(name)


# -- the loop actors ----------------------------------------------------------------------------------


class PassRun(Message):
    """What one run of one pass did (``loop_run_once``'s items; the tick statistics add these up)."""

    name: str
    ran: bool
    #: Why it did not run ("paused"), or None.
    skipped: str | None = None
    seen: int = 0
    produced: int = 0
    llm_calls: int = 0
    seconds: float = 0.0
    #: The pass reported more work beyond its budget.
    more: bool = False
    error: str | None = None


class PassStatistics(Message):
    """A pass's counters since its actor started (this process), and its ``loop_state`` row."""

    name: str
    actor: str
    paused: bool
    watermark: JsonValue = None
    #: When ``loop_state`` last changed for it (watermark moved, paused or resumed), ISO 8601; None: never.
    state_updated_at: str | None = None
    #: When it last ran (ISO 8601, the loop's clock), in this process.
    last_run: str | None = None
    runs: int = 0
    seen: int = 0
    produced: int = 0
    llm_calls: int = 0
    seconds: float = 0.0
    failed: int = 0
    deferred: int = 0
    last_error: str | None = None
    last_deferred: str | None = None


class RunPassesOnce(Request[list[PassRun]]):
    """Loop actor: run each of its passes (only ``name``, when given) once now, whatever the governor or the
    interval say, and reply what each run did. With no name, paused passes are skipped; a named one runs."""

    name: str | None = None


class GovernorVerdict(Message):
    """Whether the governor lets a tick run now (``reason`` None) and the figures it judged by."""

    run: bool
    reason: str | None
    writes_per_s: float
    load: float


class LoopActorStatus(Message):
    """One loop actor: whether it ticks here (background lease), its interval, passes and governor's verdict."""

    actor: str
    background: bool
    interval_s: float
    budget: int
    passes: tuple[PassStatistics, ...]
    governor: GovernorVerdict


class LoopStatusOf(Request[LoopActorStatus]):
    """Loop actor: its status, each pass's statistics with its ``loop_state`` row, and the governor's verdict."""


class PassStates(Request[dict[str, dict[str, Any]]]):
    """Loop actor: the ``loop_state`` rows of ``names`` (passes it need not run), by name; absent: never ran."""

    names: tuple[str, ...]
