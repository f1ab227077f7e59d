"""Requests about conflict candidates: listing (Directory) and resolving (Writer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.protocols.base import Request
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
    """Resolve an open conflict: ``keep_both``, or ``keep_a`` / ``keep_b`` (the other side is superseded)."""

    id: str
    resolution: str
