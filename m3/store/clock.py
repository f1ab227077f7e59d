"""The Writer's clock: UTC time that never repeats or goes back (it orders bitemporal events)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    """Each call returns a time later than the previous one, even if the system clock steps back."""

    def __init__(self) -> None:
        self._last = datetime.min.replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        t = datetime.now(UTC)
        if t <= self._last:
            t = self._last + timedelta(microseconds=1)
        self._last = t
        return t
