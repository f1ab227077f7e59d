"""Where runs write: a timestamped folder with a per-question JSONL log and a summary JSON.

``benchmarks/results/<UTC timestamp>-<benchmark>/`` (gitignored) holds
``questions.jsonl`` (one object per question) and ``summary.json`` (scope,
machine, embedder, settings, rates, runtime). The summary table is printed
on stdout.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from benchmarks.metrics import HitTable

RESULTS_ROOT = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """Cores this process may use, total memory, platform and Python."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem_gib = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            kib = int(fh.readline().split()[1])
        mem_gib = round(kib / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cores": cores, "memory_gib": mem_gib, "load_average": load, "platform": platform.platform(),
            "python": platform.python_version(), "cpu": platform.processor() or platform.machine()}


def code() -> dict[str, Any] | None:
    """The git commit of the checkout and whether ``m3/`` or ``benchmarks/`` differ from it; None outside git."""
    root = RESULTS_ROOT.parent.parent

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", "m3", "benchmarks")
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "modified": bool(changed)}


class RunDir:
    """A results folder for one run, with its JSONL log open for appending."""

    def __init__(self, benchmark: str, root: Path | None = None):
        self.started = datetime.now(UTC)
        stamp = self.started.strftime("%Y%m%dT%H%M%SZ")
        base = (root or RESULTS_ROOT) / f"{stamp}-{benchmark}"
        self.path, n = base, 1
        while True:  # runs started in the same second (shards) get their own folders
            try:
                self.path.mkdir(parents=True)
                break
            except FileExistsError:
                n += 1
                self.path = base.with_name(f"{base.name}-{n}")
        self.benchmark = benchmark
        self.code = code()  # at the start: the code that ran, even if the checkout changes meanwhile
        self._log: TextIO = (self.path / "questions.jsonl").open("w", encoding="utf-8")

    def log(self, record: dict[str, Any]) -> None:
        self._log.write(json.dumps(record, default=str) + "\n")
        self._log.flush()

    def summary(self, body: dict[str, Any]) -> dict[str, Any]:
        finished = datetime.now(UTC)
        full = {
            "benchmark": self.benchmark, "command": " ".join(["python -m", f"benchmarks.{self.benchmark}",
                                                              *sys.argv[1:]]),
            "started": self.started.isoformat(timespec="seconds"), "finished": finished.isoformat(timespec="seconds"),
            "runtime_s": round((finished - self.started).total_seconds(), 1), "machine": machine(),
            "code": self.code, **body,
        }
        (self.path / "summary.json").write_text(json.dumps(full, indent=2, default=str) + "\n", encoding="utf-8")
        return full

    def close(self) -> None:
        self._log.close()

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def hit_table_text(table: HitTable, title: str) -> str:
    """A fixed-width table: one row per group, one column per mode and k."""
    cols = [(mode, k) for mode in table.modes for k in table.ks]
    head = f"{'group':<28}{'n':>5}  " + " ".join(f"{f'{m}@{k}':>9}" for m, k in cols)
    lines = [title, head, "-" * len(head)]
    for group in table.groups:
        cells = " ".join(f"{table.rate(m, group, k):>9.3f}" for m, k in cols)
        lines.append(f"{group:<28}{table.count(group):>5}  {cells}")
    return "\n".join(lines)


def rows_text(rows: list[dict[str, Any]], title: str) -> str:
    """A fixed-width table of dict rows sharing the same keys."""
    if not rows:
        return title + "\n(no rows)"
    keys = list(rows[0])
    width = {k: max(len(k), *(len(_fmt(r[k])) for r in rows)) for k in keys}
    head = "  ".join(f"{k:>{width[k]}}" for k in keys)
    body = ["  ".join(f"{_fmt(r[k]):>{width[k]}}" for k in keys) for r in rows]
    return "\n".join([title, head, "-" * len(head), *body])


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)
