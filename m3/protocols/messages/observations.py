"""The Observer's Writer request: the observations of one tick and the pass's new watermark, in one transaction
(docs/cognitive-loop.md "Observer")."""

from __future__ import annotations

from typing import Any

from m3.protocols.base import Message, Request
from m3.protocols.messages.memory import NewMemory


class NewObservation(Message):
    """An ``observation`` memory to write, unless its owner already has a current one with the same ``source``
    (the key of its normalised text), and the memory it was read from (a ``derived_from`` link), if any."""

    memory: NewMemory
    derived_from: str | None = None


class ObservationsRecorded(Message):
    """What a :class:`RecordObservations` did: ids of the observations written, and how many were already
    there (same owner, same text)."""

    created: tuple[str, ...] = ()
    skipped: int = 0


class RecordObservations(Request[ObservationsRecorded]):
    """Write ``observations`` (each at most once per owner and text) and move pass ``pass_name``'s watermark to
    ``watermark`` (never backwards: each of its numbers only grows), all in one transaction."""

    pass_name: str
    observations: tuple[NewObservation, ...] = ()
    watermark: dict[str, Any]
    actor: str | None = None
