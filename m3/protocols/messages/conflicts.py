"""Messages about conflict candidates: listing (Directory) and resolving (Writer)."""

from __future__ import annotations

from m3.protocols.base import Message


class ListConflicts(Message):
    """Conflicts matching the fields that are set, visible to ``reader_agent_id`` (isolation)."""

    status: str | None = "open"
    kind: str | None = None
    memory_id: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    reader_agent_id: str | None = None
    enforce_isolation: bool = True
    limit: int = 50


class ResolveConflict(Message):
    """Resolve an open conflict: ``keep_both``, or ``keep_a`` / ``keep_b`` (the other side is superseded)."""

    id: str
    resolution: str
    actor: str | None = None
    reader_agent_id: str | None = None
    enforce_isolation: bool = True
