"""The coordination section of ``docs/benchmarks.md`` from a coordination stress run's summary."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SURFACES = ("thread", "direct", "remote", "all")

INTRO = """\
# Coordination stress

Many agents at once on **one SQLite store**: writing memories, handing work to each other, claiming
shared tasks under leases (renewing, attaching a result, completing — and sometimes abandoning a claim
so that its lease runs out under load and another agent takes the task over), polling and
acknowledging notifications. Produced by `{command}` (`benchmarks/coordination_stress.py`); the same
run at a reduced size is a test (`tests/benchmarks/test_coordination_stress.py`).

* **thread** agents are threads of the benchmark process calling m3's service (`Service.call`, the
  path every surface takes).
* **direct** agents run in other processes that open the same SQLite file with their own m3 (their own
  Writer actor): the store's cross-process locking (`BEGIN IMMEDIATE` with a busy timeout) is part of
  what is measured.
* **remote** agents run in other processes and reach the benchmark process's `m3 serve` stack (MCP
  Streamable HTTP on hypercorn/trio) with the official MCP client, each with its own bearer token,
  through `m3_call`.

Latency is from the call to its acknowledgement (committed), per operation. After the run the store is
read directly and checked (`benchmarks/coordination_check.py`): every acknowledged operation is stored,
and replaying every task's history shows no claim while another agent's lease was valid, no renewal of
a lease not held, no completion outside a valid lease.
"""


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def render(summary: dict[str, Any]) -> str:
    s = summary
    machine = s["machine"]
    setup = [
        "## Setup\n",
        "| | |\n|---|---|",
        f"| agents | {s['agents']['thread']} threads, {s['agents']['direct']} direct and {s['agents']['remote']} "
        f"remote agents in {s['settings']['direct']} + {s['settings']['remote']} processes |",
        f"| plan | {s['settings']['ops']} steps per agent (write, claim, handoff, claim, poll, repeated); "
        f"{s['settings']['abandon_share']:.0%} of claims abandoned under a {s['settings']['short_lease']:g} s "
        f"lease, the others under 60 s |",
        f"| machine | {machine['cores']} cores, {machine['platform']}, Python {machine['python']}; load average "
        f"at the end {', '.join(f'{x:.1f}' for x in machine['load_average'])} (shared with other work) |",
        "| store | SQLite, WAL, `synchronous=NORMAL`, a fresh file; embedder: the offline default, embedding "
        "each written memory in the background of its process |",
        f"| code | m3 at commit `{_commit()}`; date {s['date']} |\n",
    ]
    totals = (f"**{s['operations']} operations in {s['elapsed_s']} s ({s['ops_per_s']} per second overall), "
              f"{len(s['errors'])} errors.**\n")
    alone = {r["operation"]: r for r in s.get("baseline") or [] if r["surface"] == "all"}
    columns = [*SURFACES, *(["one agent alone"] if alone else [])]
    rows = ["| Operation | " + " | ".join(f"{x} p50 / p99 ms (n)" for x in columns) + " |",
            "|---|" + "---|" * len(columns)]
    by_op: dict[str, dict[str, dict[str, Any]]] = {}
    for row in s["latency"]:
        by_op.setdefault(row["operation"], {})[row["surface"]] = row
    for op, measured in by_op.items():
        cells = {**measured, "one agent alone": alone.get(op, {})}
        parts = [f"{c['p50_ms']:.1f} / {c['p99_ms']:.1f} ({c['count']})" if (c := cells.get(x)) else "—"
                 for x in columns]
        rows.append(f"| `{op}` | " + " | ".join(parts) + " |")
    reading = [
        "## Reading the numbers\n",
        "* Every change goes through one Writer per process, one transaction at a time (group commit). A "
        "coordination change is several statements — a savepoint, the row read, a conditional `UPDATE … "
        "RETURNING`, a history row, notifications — so with 64 agents in one process the latency is mostly "
        "the wait in the Writer's queue: its p50 is about the number of agents divided by the process's "
        "throughput, not the cost of one operation (the last column: the same plan run by one agent alone on "
        "a fresh store, just before). The busy-box load above slows that throughput further.",
        "* **direct** processes have their own Writer and few agents, hence the low p50; their long p99 is "
        "SQLite's lock handoff between processes: a process waiting for the write lock sleeps in growing "
        "steps (busy timeout) while the busy one takes the lock again. Many agents are better served by one "
        "`m3 serve` (or PostgreSQL) than by many processes writing one SQLite file.",
        "* **remote** adds HTTP, MCP JSON-RPC and the `m3_call` envelope on both sides, a few milliseconds "
        "per call on an idle machine, to the same queue as the threads.\n",
    ]
    v = s["verification"]
    checks = ["| Check | Value |", "|---|---|"] + [f"| {k.replace('_', ' ')} | {v[k]} |" for k in v
                                                      if k not in {"examples"}]
    return "\n".join([INTRO.format(command=s["command"].strip()), *setup, "## Results\n", totals, *rows, "",
                      *reading, "## Verification\n", *checks, ""])
