"""Timing one probe in two checkouts in turn: a baseline (another version of m3, e.g. ``git archive REV | tar
-x -C DIR``) and this one, each in a subprocess with its own m3 first on the import path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: This checkout (the folder holding ``m3/`` and ``benchmarks/``).
HERE = Path(__file__).resolve().parent.parent


def probe(checkout: Path, script: str, *args: str) -> dict[str, Any]:
    """Run ``script`` (Python source printing one JSON object on its last line) with ``checkout``'s m3; that
    object."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, cwd=checkout,
                          capture_output=True, text=True, check=True)
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def in_turn(baseline: Path | None, rounds: int, script: str, *args: str) -> dict[str, list[dict[str, Any]]]:
    """``script``'s answers per version (``before``: ``baseline``, if given; ``after``: this checkout), the
    versions alternating ``rounds`` times so that both meet the machine in the same state."""
    versions = {"after": HERE} if baseline is None else {"before": baseline, "after": HERE}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in versions}
    for _ in range(rounds):
        for name, checkout in versions.items():
            runs[name].append(probe(checkout, script, *args))
    return runs
