"""A benchmark script run by two checkouts of m3, one after the other, for an A/B in one run.

A script with ``--baseline DIR`` calls :func:`run_versions` in its own process: the same script file runs
twice with ``--json``, first with ``DIR`` first on the path (that checkout's m3 and ``benchmarks`` package),
then with this checkout, and prints one JSON row each. Import this module only on the ``--baseline`` path
(inside the function that needs it): the child runs with the baseline's ``benchmarks`` package, which may
be older than this module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.latency import ratio


def run_versions(script: Path, baseline: Path, args: Sequence[str]) -> list[dict[str, Any]]:
    """Rows ``{"version": "before"|"after", **row}`` of ``script --json *args`` run by ``baseline``, then by this
    checkout, each in its own process."""
    rows = []
    for version, root in (("before", baseline.resolve()), ("after", Path(__file__).resolve().parent.parent)):
        out = subprocess.run([sys.executable, str(script.resolve()), "--json", *args], cwd=root,
                             env={**os.environ, "PYTHONPATH": str(root)}, check=True, capture_output=True,
                             text=True).stdout
        rows.append({"version": version, **json.loads(out.strip().splitlines()[-1])})
    return rows


def add_ratios(rows: list[dict[str, Any]], keys: Sequence[str],
               name: Callable[[str], str] = lambda key: key + "_x") -> None:
    """Each row's ``keys`` divided by the first row's, as ``name(key)``."""
    for row in rows:
        for key in keys:
            row[name(key)] = ratio(row[key], rows[0][key])
