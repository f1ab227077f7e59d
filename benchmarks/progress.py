"""A tiny progress printer on stderr (no dependency): ``label  n/total  rate  eta``.

On a terminal it redraws one line; otherwise it prints a line every few
seconds so that logs of background runs stay short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

T = TypeVar("T")


class Progress:
    def __init__(self, label: str, total: int | None, *, stream: TextIO | None = None, every_s: float = 5.0):
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = 0.2 if self.tty else every_s
        self.start = time.monotonic()
        self._last = 0.0
        self.note = ""

    def update(self, n: int = 1, note: str | None = None) -> None:
        self.done += n
        if note is not None:
            self.note = note
        now = time.monotonic()
        if now - self._last >= self.every_s or (self.total is not None and self.done >= self.total):
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        of = f"/{self.total}" if self.total is not None else ""
        eta = ""
        if self.total and rate > 0:
            eta = f" eta {_clock((self.total - self.done) / rate)}"
        line = f"{self.label} {self.done}{of} {rate:.1f}/s {_clock(elapsed)}{eta} {self.note}".rstrip()
        self.stream.write(("\r" + line + "\x1b[K") if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        self._draw(time.monotonic())
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()


def track(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    """Yield ``items`` while showing progress."""
    bar = Progress(label, total if total is not None else _len(items))
    try:
        for item in items:
            yield item
            bar.update()
    finally:
        bar.close()


def _len(items: Iterable[object]) -> int | None:
    return len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
