"""Arguments, results and declarations of the ``loop`` domain: the cognitive loop's status, a run on demand,
pause and resume (docs/cognitive-loop.md).

The loop's passes (observe, reflect, decay, rollup) run in the background in the engine of a store; these tools
show what they did and steer them. Statistics count since the answering process started; the pause flags and
watermarks live in the store (``loop_state``), so a restarted engine keeps them.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, create_model

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.tools.meta import NoArgs

_PASS = Field(None, min_length=1, max_length=40,
              description="One pass: observe, reflect, decay or rollup; left out, every pass.")


def _pass_args(model: str, doc: str) -> type[ToolArgs]:
    # The argument is called `pass`, a Python keyword, so the model is built rather than written as a class.
    fields: dict[str, Any] = {"pass": (str | None, _PASS)}
    built: type[ToolArgs] = create_model(model, __base__=ToolArgs, __doc__=doc, **fields)
    return built


LoopPassArgs = _pass_args("LoopPassArgs", "Which pass (left out: every pass).")


def pass_of(args: ToolArgs) -> str | None:
    """The ``pass`` argument of a :data:`LoopPassArgs`."""
    found: str | None = getattr(args, "pass")
    return found


class LoopPassStatus(ToolResult):
    name: str = Field(description="The pass: observe, reflect, decay or rollup.")
    enabled: bool = Field(description="Its switch loop.<name>.enabled is on.")
    registered: bool = Field(description="This m3 has the pass and runs it (in the actor named by actor).")
    actor: str | None = Field(description="The loop actor that runs it (observer or reflector), or None.")
    paused: bool = Field(description="Paused by loop_pause (kept in the store): it does not run until loop_resume.")
    interval_s: float = Field(description="Time between two ticks (loop.interval_s).")
    last_run: str | None = Field(description="When it last ran in this process (ISO 8601), or None.")
    watermark: Any = Field(description="How far the pass has got (what it stored with its last commit).")
    state_updated_at: str | None = Field(description="When its watermark or pause flag last changed (ISO 8601).")
    runs: int = Field(description="Steps run in this process (ticks, more-work steps and loop_run_once).")
    seen: int = Field(description="Items (memories, chat turns, pairs) looked at.")
    produced: int = Field(description="Items produced (observations, conflicts, archived memories, summaries).")
    llm_calls: int = Field(description="Chat model calls made.")
    seconds: float = Field(description="Time spent stepping, reading and committing.")
    failed: int = Field(description="Steps that failed (each is tried again at the next tick).")
    deferred: int = Field(description="Ticks the governor put off (agents writing heavily, or a busy machine).")
    last_error: str | None = Field(description="The error of the last step if it failed, else None.")
    last_deferred: str | None = Field(description="Why the governor last put a tick off, or None.")


class LoopGovernorStatus(ToolResult):
    run: bool = Field(description="A tick would run now (False: it would be put off, see reason).")
    reason: str | None = Field(description="Why a tick would be put off now, or None.")
    writes_per_s: float = Field(description="The Writer's requests per second since the governor's last check, "
                                            "the loop's own commits left out.")
    load: float = Field(description="The one-minute load average per core.")
    max_writes_per_s: float = Field(description="loop.governor.max_writes_per_s (0: not checked).")
    max_load: float = Field(description="loop.governor.max_load (0: not checked).")


class LoopStatusResult(ToolResult):
    enabled: bool = Field(description="loop.enabled: the loop ticks in the background where it may.")
    background: bool = Field(description="This process ticks the loop (the engine holding the background lease); "
                                         "False in a one-shot command or an engine without the lease.")
    interval_s: float
    budget: int = Field(description="Most items each pass looks at per step (loop.budget).")
    passes: list[LoopPassStatus]
    governor: LoopGovernorStatus


LOOP_STATUS = ToolSpec(
    name="loop_status", domain="loop", args=NoArgs, result=LoopStatusResult, read_only=True,
    description=(
        "Show the background cognitive loop: for each pass (observe, reflect, decay, rollup) whether it is on, "
        "paused, when it last ran, its watermark, and how many items it saw and produced, model calls, time, "
        "failures and ticks put off; and whether the governor would let a tick run now. Use it to see whether "
        "the loop keeps up or why it does not run."
    ),
)


class LoopRun(ToolResult):
    name: str
    ran: bool = Field(description="The pass stepped (False: skipped, see skipped).")
    skipped: str | None = Field(description="Why it did not run (paused), or None.")
    seen: int
    produced: int
    llm_calls: int
    seconds: float
    more: bool = Field(description="More work waits beyond the budget: call again, or let the loop go on.")
    error: str | None = Field(description="Why the step failed, or None; nothing of a failed step is committed.")


class LoopRunOnceResult(ToolResult):
    count: int
    runs: list[LoopRun]


LOOP_RUN_ONCE = ToolSpec(
    name="loop_run_once", domain="loop", args=LoopPassArgs, result=LoopRunOnceResult,
    description=(
        "Run the cognitive loop's passes now, one step each (or only the pass named), whatever the interval or "
        "the governor say, wait for them and return what each step saw and produced. Paused passes are skipped "
        "unless named. Use it to catch up at once, e.g. after importing conversations."
    ),
)


class LoopPauseResult(ToolResult):
    paused: bool = Field(description="True after loop_pause, False after loop_resume.")
    passes: list[str] = Field(description="The passes changed.")


LOOP_PAUSE = ToolSpec(
    name="loop_pause", domain="loop", args=LoopPassArgs, result=LoopPauseResult,
    description=(
        "Pause the background cognitive loop, every pass or only the one named, until loop_resume; the pause is "
        "kept in the store, so a restarted engine keeps it. Nothing is undone: a paused pass simply does not run."
    ),
)

LOOP_RESUME = ToolSpec(
    name="loop_resume", domain="loop", args=LoopPassArgs, result=LoopPauseResult,
    description=(
        "Resume the background cognitive loop after loop_pause, every pass or only the one named; it goes on "
        "from its watermark at the next tick."
    ),
)

LOOP_TOOLS: tuple[ToolSpec, ...] = (LOOP_STATUS, LOOP_RUN_ONCE, LOOP_PAUSE, LOOP_RESUME)
