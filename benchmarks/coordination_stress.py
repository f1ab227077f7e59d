"""Coordination stress: many agents writing, handing off and claiming tasks on one SQLite store at once.

``python -m benchmarks.coordination_stress`` runs 64 agents as threads of
this process (``Service.call``), plus 4 processes of 4 agents each: two
open the same SQLite file with their own m3 (their own Writer: the store's
cross-process locking is exercised), two reach this process's remote MCP
server over Streamable HTTP, each agent with its own bearer token. Every
agent runs the same fixed number of operations (``--ops``: writes,
handoffs, claims with heartbeat, result and completion, some claims
abandoned under a short lease, notification polls and acks).

Afterwards the store is read directly and checked: every acknowledged
write, handoff, claim and completion is stored, and no task was ever
claimed while another agent's lease on it was valid (the task histories
are replayed). Latencies (p50/p99 per operation and surface) go to
``benchmarks/results/<UTC time>-coordination_stress/summary.json`` and, with
``--doc``, to the coordination section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import trio

from benchmarks.coordination_agents import PLAN, TASK_KIND, Plan, Record, run_agent
from benchmarks.coordination_check import verify
from m3.config import Config, load_config
from m3.gateway.service import CallContext, Service

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"


class HttpServer:
    """This process's remote MCP server, on its own trio loop in a thread."""

    def __init__(self, service: Service):
        self._service = service
        self._ready = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)
        self.url = ""

    async def _main(self) -> None:
        from m3.gateway.http_server import serve

        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()

        def ready(url: str) -> None:
            self.url = url
            self._ready.set()

        await serve(self._service, "127.0.0.1", 0, ready=ready, shutdown=self._stop)

    def start(self) -> str:
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the MCP HTTP server did not start")
        return self.url

    def stop(self) -> None:
        self._token.run_sync_soon(self._stop.set)
        self._thread.join(30)


def agent_names(args: argparse.Namespace) -> dict[str, list[list[str]]]:
    per = args.agents_per_process
    return {
        "thread": [[f"t{i:02d}"] for i in range(args.threads)],
        "direct": [[f"d{p}-{i}" for i in range(per)] for p in range(args.direct)],
        "remote": [[f"r{p}-{i}" for i in range(per)] for p in range(args.remote)],
    }


def prepare(service: Service, names: dict[str, list[list[str]]], tasks: int) -> dict[str, str]:
    """Register every agent, create the tasks, issue the remote agents' tokens (agent -> token)."""
    from m3.gateway.tokens import new_token
    from m3.protocols.messages.coordination import CreateToken
    from m3.store.agents import hash_token

    async def setup() -> None:
        lead = CallContext(agent_id="lead")
        for group in [["lead"], *(g for groups in names.values() for g in groups)]:
            for agent in group:
                await service.call("agent_register", {"agent_id": agent, "role": "stress"}, lead)
        for i in range(tasks):
            await service.call("task_create", {"title": f"stress task {i}", "kind": TASK_KIND,
                                               "priority": i % 5}, lead)

    trio.run(setup)
    service.system.embedder_backend.embed(["warm-up"])  # the model loads now, not during the measured run
    tokens = {}
    for group in names["remote"]:
        for agent in group:
            tokens[agent] = token = new_token()
            service.system.writer.ask(CreateToken(agent_id=agent, token_hash=hash_token(token)), 60)
    return tokens


def spawn(role: str, agents: list[str], spec: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[str]:
    body = json.dumps({**spec, "agents": agents})
    return subprocess.Popen([sys.executable, "-m", "benchmarks.coordination_agents", role, body], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def run(args: argparse.Namespace, config: Config, env: dict[str, str]) -> tuple[list[Record], float]:
    from m3.gateway.runtime import running

    names = agent_names(args)
    peers = [a for groups in names.values() for g in groups for a in g] + ["lead"]  # lead: a peer even alone
    claim_steps = (len(peers) - 1) * sum(1 for i in range(args.ops) if PLAN[i % len(PLAN)] == "claim")
    spec = {"ops": args.ops, "peers": peers, "seed": args.seed, "abandon_share": args.abandon_share,
            "short_lease_s": args.short_lease}
    plan = Plan(ops=args.ops, peers=tuple(peers), seed=args.seed, abandon_share=args.abandon_share,
                short_lease_s=args.short_lease)
    with running(config) as service:
        tokens = prepare(service, names, tasks=claim_steps)
        server = HttpServer(service)
        spec["url"] = server.start()
        children = [spawn("direct", g, spec, env) for g in names["direct"]]
        children += [spawn("remote", g, {**spec, "tokens": [tokens[a] for a in g]}, env) for g in names["remote"]]
        records = [Record(agent=g[0], surface="thread") for g in names["thread"]]
        try:
            for child in children:
                assert child.stdout is not None
                line = child.stdout.readline().strip()
                if line != "ready":
                    raise RuntimeError(f"a child did not start: {line!r} {child.stderr.read() if child.stderr else ''}")
            gate = threading.Barrier(len(records) + 1)
            threads = [threading.Thread(target=_thread_agent, args=(service, r, plan, gate)) for r in records]
            for t in threads:
                t.start()
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            gate.wait(60)
            started = time.perf_counter()
            for t in threads:
                t.join()
            for child in children:
                out, err = child.communicate(timeout=3600)
                if child.returncode != 0:
                    raise RuntimeError(f"a child failed: {err[-3000:]}")
                records += [Record(**r) for r in json.loads(out.strip().splitlines()[-1])]
            elapsed = time.perf_counter() - started
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
            server.stop()
    return records, elapsed


def _thread_agent(service: Service, record: Record, plan: Plan, gate: threading.Barrier) -> None:
    ctx = CallContext(agent_id=record.agent)

    async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return await service.call(tool, args, ctx)

    gate.wait(60)
    try:
        trio.run(run_agent, record, call, plan)
    except Exception as exc:  # counted as an error of the run, not lost with the thread
        record.errors.append(f"agent crashed: {type(exc).__name__}: {exc}")


def latency_table(records: list[Record]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[float]] = {}
    for r in records:
        for op, values in r.latencies.items():
            groups.setdefault((op, r.surface), []).extend(values)
            groups.setdefault((op, "all"), []).extend(values)
    rows = []
    for (op, surface), values in sorted(groups.items()):
        ms = np.asarray(values) * 1000.0
        rows.append({"operation": op, "surface": surface, "count": len(values),
                     "p50_ms": round(float(np.percentile(ms, 50)), 2), "p99_ms": round(float(np.percentile(ms, 99)), 2),
                     "max_ms": round(float(ms.max()), 2)})
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=64, help="agents as threads of this process")
    parser.add_argument("--direct", type=int, default=2, help="processes with their own m3 on the same store")
    parser.add_argument("--remote", type=int, default=2, help="processes using this process's MCP over HTTP")
    parser.add_argument("--agents-per-process", type=int, default=4)
    parser.add_argument("--ops", type=int, default=40, help="operations (plan steps) per agent")
    parser.add_argument("--abandon-share", type=float, default=0.1, help="claims left to expire on purpose")
    parser.add_argument("--short-lease", type=float, default=1.0, help="seconds of an abandoned claim's lease")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the run folder goes")
    parser.add_argument("--doc", action="store_true", help="also write the coordination section of docs/benchmarks.md")
    parser.add_argument("--baseline", action="store_true",
                        help="first run one agent alone (no contention), for comparison; implied by --doc")
    args = parser.parse_args(argv)
    baseline = None
    if args.baseline or args.doc:
        alone = argparse.Namespace(**{**vars(args), "threads": 1, "direct": 0, "remote": 0})
        baseline = latency_table(fresh_run(alone)[0])
    records, elapsed, checks = fresh_run(args)
    summary = summarise(args, records, elapsed, checks)
    summary["baseline"] = baseline
    out = args.results / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-coordination_stress"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (out / "records.json").write_text(json.dumps([asdict(r) for r in records]), encoding="utf-8")
    summary["results_dir"] = str(out)
    if args.doc:
        from benchmarks.coordination_report import render
        from benchmarks.doc_sections import demote, write_section

        write_section("coordination-stress", demote(render(summary)))
    print(json.dumps({k: summary[k] for k in ("agents", "operations", "elapsed_s", "ops_per_s", "verification")},
                     indent=2))
    return summary


def fresh_run(args: argparse.Namespace) -> tuple[list[Record], float, dict[str, Any]]:
    """One run on a new store in a temporary directory: the records, the elapsed time, the checks."""
    with tempfile.TemporaryDirectory(prefix="m3-stress-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'm3.db'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
        env.update({"M3_HOME": str(Path(tmp) / "home"), "M3_STORE_URL": url, "PYTHONPATH": str(ROOT)})
        records, elapsed = run(args, load_config(env), env)
        return records, elapsed, verify(url, records)


def summarise(args: argparse.Namespace, records: list[Record], elapsed: float, checks: dict[str, Any]
              ) -> dict[str, Any]:
    operations = sum(len(v) for r in records for v in r.latencies.values())
    return {
        "command": "python -m benchmarks.coordination_stress " + " ".join(sys.argv[1:] if __name__ == "__main__"
                                                                           else []),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": {"cores": os.cpu_count(), "load_average": os.getloadavg(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "agents": {s: sum(r.surface == s for r in records) for s in ("thread", "direct", "remote")},
        "operations": operations, "elapsed_s": round(elapsed, 2), "ops_per_s": round(operations / elapsed, 1),
        "errors": [f"{r.agent}: {e}" for r in records for e in r.errors],
        "verification": checks, "latency": latency_table(records),
    }


if __name__ == "__main__":
    result = main()
    sys.exit(0 if result["verification"]["ok"] else 1)
