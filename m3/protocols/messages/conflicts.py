"""Requests about conflict candidates: listing (Directory), resolving and recording the Reflector's (Writer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from m3.protocols.base import Message, Request
from m3.protocols.messages.memory import Change, Filtered

if TYPE_CHECKING:  # the tool module imports these requests, so replies are named in strings (see Request)
    from m3.protocols.tools import conflicts  # noqa: F401


class ListConflicts(Filtered, Request["conflicts.ConflictsListResult"]):
    """Conflicts matching the fields that are set (status ``all``: any), visible through ``filter``'s isolation."""

    status: str = "open"
    kind: str | None = None
    memory_id: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    limit: int = 50


class ResolveConflict(Change, Request["conflicts.ConflictRecord"]):
    """Resolve an open conflict: ``keep_both``, ``keep_a`` / ``keep_b`` (the other side is superseded), or
    ``merge``: a new memory with ``content`` (and ``title``) supersedes both."""

    id: str
    resolution: str
    content: str | None = None
    title: str | None = None


class FoundConflict(Message):
    """One pair the Reflector found, a ``contradiction`` or a ``duplicate``: ``older`` is recorded as memory_a."""

    older: str
    newer: str
    reason: str
    similarity: float
    details: dict[str, Any] = Field(default_factory=dict)
    kind: str = "contradiction"


class RecordContradictions(Request[int]):
    """Record the Reflector's candidates (pairs recorded already, as any kind, or no longer both current are
    skipped) and move pass ``pass_name``'s watermark to ``watermark``, in one transaction; replies how many
    were recorded."""

    conflicts: tuple[FoundConflict, ...] = ()
    pass_name: str
    watermark: dict[str, Any]
    actor: str
