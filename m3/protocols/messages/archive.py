"""The Writer request of the decay pass: archive memories and move the pass's watermark, in one transaction.

Archiving hides a memory from default reads without deleting or retiring it (``memories.archived_at`` /
``archive_reason``); ``memory_restore`` undoes it (:mod:`m3.store.archive_writes`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from m3.protocols.base import Message, Request

ArchiveReason = Literal["decayed", "expired"]


class ArchiveItem(Message):
    """One memory the pass decided to archive, with what it decided on (the Writer checks it still holds)."""

    id: str
    reason: ArchiveReason
    #: The last use the pass saw (``last_accessed_at`` or else ``recorded_at``): a memory used since is kept.
    last_used: datetime
    #: The decayed importance the pass computed (kept in the history event).
    decayed: float | None = None


class ArchiveResult(Message):
    """What an :class:`ArchiveMemories` did: the ids archived (those still eligible at commit time)."""

    archived: tuple[str, ...]
    #: Ids left alone because they changed since the pass read them (used, pinned, retired, archived, expiry moved).
    skipped: tuple[str, ...] = ()


class ArchiveMemories(Request[ArchiveResult]):
    """Archive ``items`` (each only if still eligible) at the Writer's clock and set pass ``pass_name``'s
    watermark to ``watermark``, in one transaction; one history event per memory archived, by ``actor``."""

    items: tuple[ArchiveItem, ...] = ()
    pass_name: str
    watermark: Any
    #: The loop's time of the decision (``PassContext.now``): an ``expired`` item must have expired by then.
    at: datetime
    actor: str = "m3:decay"
