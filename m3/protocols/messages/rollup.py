"""The Writer requests of belief roll-up (docs/cognitive-loop.md "Belief roll-up (opt-in)").

:class:`CommitRollup` carries what one tick of the roll-up pass decided — the beliefs to write, each with the
notes it consolidates — together with the pass's new watermark, so both commit in one transaction.
:class:`UnconsolidateMemory` is the undo (the ``memory_unconsolidate`` tool).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from m3.protocols.base import Message, Request
from m3.protocols.messages.memory import Change

if TYPE_CHECKING:  # the tool module imports these requests
    from m3.protocols.tools import consolidation  # noqa: F401

#: The type of the memories the roll-up pass writes.
BELIEF = "belief"
#: The relationship from a belief to each note it consolidates.
CONSOLIDATES = "consolidates"
#: The history actor of the pass's writes.
ROLLUP_ACTOR = "m3:rollup"
#: ``retire_reason`` of a belief retired by memory_unconsolidate.
UNCONSOLIDATED = "unconsolidated"


class NewBelief(Message):
    """One belief to write: the summary of ``sources`` (current memories of one owner)."""

    title: str
    content: str
    scope: str
    agent_id: str | None = None
    user_id: str | None = None
    importance: float = 0.5
    #: The notes it consolidates, most central first.
    sources: tuple[str, ...]
    #: The current belief this one is the new version of (it gets superseded), or None for a new cluster.
    replaces: str | None = None
    #: ``extractive`` or ``model``: who wrote the text.
    method: str = "extractive"
    metadata: dict[str, Any] = Field(default_factory=dict)


class RollupWritten(Message):
    """What a :class:`CommitRollup` wrote."""

    #: Ids of the beliefs written, in the order of the request's beliefs that were written.
    created: tuple[str, ...] = ()
    #: Ids of the beliefs they superseded.
    superseded: tuple[str, ...] = ()
    #: Beliefs of the request left out: a source or the belief to replace changed after the pass read them.
    skipped: int = 0


class CommitRollup(Request[RollupWritten]):
    """Writer: write ``beliefs`` (each linked ``consolidates`` to its sources) and set pass ``name``'s
    watermark to ``watermark``, in one transaction."""

    beliefs: tuple[NewBelief, ...] = ()
    watermark: dict[str, Any]
    name: str = "rollup"
    actor: str = ROLLUP_ACTOR


class UnconsolidateMemory(Change, Request["consolidation.MemoryUnconsolidateResult"]):
    """Writer: retire the roll-up belief ``id`` (soft, with history), remove its ``consolidates`` links; its
    sources stay as they are. With ``allow_again`` the pass may summarise the same notes again."""

    id: str
    reason: str | None = None
    allow_again: bool = False
