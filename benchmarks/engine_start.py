"""A store's first command: the engine's start, as a user (or a test) meets it, for this checkout and another.

``python -m benchmarks.engine_start [--baseline DIR] [--rounds 5]``: each round, for each version in turn (the
baseline first, e.g. ``git archive REV | tar -x -C DIR``), a new home (a new SQLite store) gets
``m3 engine start``, then ``m3 memory write``, ``m3 memory search`` and ``m3 engine stop``, each a process of
that version's CLI (``python -c``, its folder first on the import path), timed from outside as wall seconds.
``engine start`` spans the front-end's spawn of the engine up to the engine saying it listens. Every home gets
the 8-bit query model already derived and the tool manifest already written (copies of ones made before the
rounds), as on a machine that has run m3 once: each is made once per machine or version (docs/embedder.md,
docs/architecture.md), not at every start.

Prints the median of each step per version and the ratio of this checkout's medians to the baseline's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.checkouts import HERE
from benchmarks.latency import ratio
from benchmarks.report import rows_text

#: The CLI of the checkout on the import path (``sys.argv[1:]`` are its arguments).
CLI = "import sys; from m3.gateway.cli import main; sys.exit(main(sys.argv[1:]))"
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("engine start", ("engine", "start")),
    ("memory write", ("memory", "write", "--content", "the engine started for this note")),
    ("memory search", ("memory", "search", "--query", "which note started the engine")),
    ("engine stop", ("engine", "stop")),
)


def run_cli(checkout: Path, home: Path, *argv: str) -> float:
    """Wall seconds of one CLI command of ``checkout`` on ``home`` (it must succeed)."""
    # m3's defaults only: no setting of the caller's environment (a store URL, an embed server) reaches it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
    env.update(PYTHONPATH=str(checkout), M3_HOME=str(home))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CLI, *argv], env=env, cwd=checkout, capture_output=True, text=True,
                          timeout=300, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: m3 {' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return took


def new_home(root: Path, prepared: Path | None) -> Path:
    """A fresh, private ``M3_HOME`` under ``root``; given a ``prepared`` home, with its query model and tool
    manifests (what a machine keeps after m3's first run: each made once per machine or version)."""
    home = Path(tempfile.mkdtemp(dir=root)) / "home"
    home.mkdir(mode=0o700)
    if prepared is not None:
        shutil.copytree(prepared / "models", home / "models")
        (home / "run").mkdir(mode=0o700)
        for manifest in (prepared / "run").glob("tools-*.json"):
            shutil.copy2(manifest, home / "run" / manifest.name)
    return home


def measure(versions: dict[str, Path], rounds: int, root: Path) -> list[dict[str, Any]]:
    prepared = new_home(root, None)  # the query model derived once, and each version's tool manifest written
    for checkout in versions.values():
        run_cli(checkout, prepared, "engine", "start")
        run_cli(checkout, prepared, "memory", "search", "--query", "warm")
        run_cli(checkout, prepared, "engine", "stop")
    took: dict[str, dict[str, list[float]]] = {v: {step: [] for step, _ in STEPS} for v in versions}
    for _ in range(rounds):
        for version, checkout in versions.items():
            home = new_home(root, prepared)
            for step, argv in STEPS:
                took[version][step].append(run_cli(checkout, home, *argv))
    rows = []
    for step, _ in STEPS:
        base = statistics.median(next(iter(took.values()))[step])
        for version, steps in took.items():
            median = statistics.median(steps[step])
            rows.append({"step": step, "version": version, "rounds": len(steps[step]),
                         "median_s": round(median, 3), "min_s": round(min(steps[step]), 3),
                         "max_s": round(max(steps[step]), 3), "x": ratio(median, base)})
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout, timed in turn with this one")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    versions = {"before": args.baseline.resolve(), "after": HERE} if args.baseline is not None else {"after": HERE}
    with tempfile.TemporaryDirectory(prefix="m3-engine-start-") as root:
        rows = measure(versions, args.rounds, Path(root))
    print(rows_text(rows, "A new store's first commands, wall seconds per CLI process"))
    return rows


if __name__ == "__main__":
    main()
