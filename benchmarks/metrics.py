"""Hit-rate metrics: SHR@k (any of the top k from a gold session) and turn recall@k (any gold turn).

Rates are kept per mode, per k, overall and per question type.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

OVERALL = "overall"


def first_hit_rank(found: Iterable[str], gold: frozenset[str]) -> int | None:
    """1-based rank of the first result whose label is gold, or None."""
    for rank, label in enumerate(found, 1):
        if label in gold:
            return rank
    return None


class HitTable:
    """Counts hits per (mode, group, k); groups are "overall" and each question type."""

    def __init__(self, modes: Iterable[str], ks: Iterable[int]):
        self.modes = list(modes)
        self.ks = sorted(ks)
        self._hits: dict[tuple[str, str, int], int] = defaultdict(int)
        self._n: dict[str, int] = defaultdict(int)

    def add(self, qtype: str, hits: dict[str, dict[int, bool]]) -> None:
        """Record one question: ``hits[mode][k]`` is whether its top k held a gold item."""
        for group in (OVERALL, qtype):
            self._n[group] += 1
            for mode, by_k in hits.items():
                for k, hit in by_k.items():
                    self._hits[(mode, group, k)] += int(hit)

    @property
    def groups(self) -> list[str]:
        return [OVERALL, *sorted(g for g in self._n if g != OVERALL)]

    def count(self, group: str = OVERALL) -> int:
        return self._n[group]

    def rate(self, mode: str, group: str, k: int) -> float:
        n = self._n[group]
        return self._hits[(mode, group, k)] / n if n else 0.0

    def as_dict(self) -> dict[str, Any]:
        """``{group: {"n": n, mode: {"@k": rate}}}``, rates rounded to 4 places."""
        return {
            group: {"n": self._n[group],
                    **{mode: {f"@{k}": round(self.rate(mode, group, k), 4) for k in self.ks} for mode in self.modes}}
            for group in self.groups
        }
