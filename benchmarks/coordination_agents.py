"""The workload of one agent in the coordination stress run, and the child processes that run agents.

Every agent runs the same fixed plan of operations through whatever
surface it has — ``Service.call`` in the parent's threads or in a child
process with its own m3 on the same store ("direct"), or the official MCP
client over Streamable HTTP with the agent's own bearer token ("remote").
It records every acknowledged operation (what the store must now hold) and
its latency. Claims: most are renewed once and completed with a result;
some are abandoned on purpose under a short lease, so that leases expire
under load and other agents take those tasks over.

A child is ``python -m benchmarks.coordination_agents ROLE SPEC_JSON``: it
prints ``ready``, waits for a line on stdin, runs its agents concurrently
and prints one JSON document with their records.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import trio

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]

#: One round of an agent's plan; an agent runs ``ops`` steps, cycling through it.
PLAN = ("write", "claim", "handoff", "claim", "poll")
WORDS = ("deploy", "budget", "incident", "roadmap", "invoice", "release", "backup", "review", "latency", "quota")
TASK_KIND = "stress"


@dataclass
class Record:
    """What one agent saw: latencies per operation, and every acknowledged effect."""

    agent: str
    surface: str
    latencies: dict[str, list[float]] = field(default_factory=dict)
    memories: list[str] = field(default_factory=list)
    handoffs: list[list[str]] = field(default_factory=list)  # [inbox id, receiver]
    claims: list[dict[str, Any]] = field(default_factory=list)  # task, version, lease_expires_at, abandoned
    completed: list[str] = field(default_factory=list)
    empty_claims: int = 0
    errors: list[str] = field(default_factory=list)

    def time(self, op: str, seconds: float) -> None:
        self.latencies.setdefault(op, []).append(seconds)


@dataclass(frozen=True)
class Plan:
    ops: int
    peers: tuple[str, ...]
    seed: int
    abandon_share: float = 0.1
    short_lease_s: float = 1.0
    lease_s: float = 60.0


async def timed(record: Record, op: str, call: Call, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
    started = time.perf_counter()
    try:
        result = await call(tool, args)
    except Exception as exc:  # a benchmark reports every failure instead of stopping at the first
        record.errors.append(f"{op}: {type(exc).__name__}: {getattr(exc, 'code', '')} {exc}")
        return None
    record.time(op, time.perf_counter() - started)
    return result


async def run_agent(record: Record, call: Call, plan: Plan) -> None:
    rng = random.Random(f"{plan.seed}-{record.agent}")
    last_memory: str | None = None
    for step in range(plan.ops):
        kind = PLAN[step % len(PLAN)]
        if kind == "write":
            text = f"{record.agent} step {step}: " + " ".join(rng.choices(WORDS, k=6))
            out = await timed(record, "memory_write", call, "memory_write",
                              {"content": text, "type": "observation", "scope": "org"})
            if out is not None:
                record.memories.append(out["id"])
                last_memory = out["id"]
        elif kind == "handoff":
            to = rng.choice([p for p in plan.peers if p != record.agent])
            out = await timed(record, "memory_handoff", call, "memory_handoff", {
                "to_agent": to, "task": f"follow up on step {step} of {record.agent}",
                "context_ids": [last_memory] if last_memory else []})
            if out is not None:
                record.handoffs.append([out["id"], to])
        elif kind == "claim":
            await claim_and_work(record, call, plan, rng, last_memory)
        else:
            await read_news(record, call)


async def claim_and_work(record: Record, call: Call, plan: Plan, rng: random.Random, memory: str | None) -> None:
    abandon = rng.random() < plan.abandon_share
    lease = plan.short_lease_s if abandon else plan.lease_s
    out = await timed(record, "task_claim", call, "task_claim", {"filter": {"kind": TASK_KIND}, "lease": lease})
    if out is None:
        return
    if not out["claimed"]:
        record.empty_claims += 1
        return
    task = out["task"]
    record.claims.append({"task": task["id"], "version": task["version"],
                          "lease_expires_at": task["lease_expires_at"], "abandoned": abandon})
    if abandon:
        return  # the lease runs out and someone else takes the task over
    renewed = await timed(record, "task_heartbeat", call, "task_heartbeat", {"id": task["id"], "lease": lease})
    if renewed is None:
        return
    args: dict[str, Any] = {"id": task["id"], "version": renewed["version"], "note": f"done by {record.agent}"}
    if memory is not None:
        args["memory_id"] = memory
    with_result = await timed(record, "task_set_result", call, "task_set_result", args)
    if with_result is None:
        return
    done = await timed(record, "task_update", call, "task_update",
                       {"id": task["id"], "version": with_result["version"], "state": "completed"})
    if done is not None:
        record.completed.append(task["id"])


async def read_news(record: Record, call: Call) -> None:
    out = await timed(record, "notifications_poll", call, "notifications_poll", {"limit": 50})
    if out is None or not out["items"]:
        return
    await timed(record, "notifications_ack", call, "notifications_ack", {"ids": [n["id"] for n in out["items"]]})


# --- child processes ------------------------------------------------------------------------------

async def _direct(spec: dict[str, Any], records: list[Record]) -> None:
    from m3.gateway.runtime import running
    from m3.gateway.service import CallContext

    with running(drain_embeddings=False) as service:
        service.system.embedder_backend.embed(["warm-up"])  # load the model before the measured run
        _ready_then_wait()
        async with trio.open_nursery() as nursery:
            for record in records:
                ctx = CallContext(agent_id=record.agent)

                async def call(tool: str, args: dict[str, Any], ctx: CallContext = ctx) -> dict[str, Any]:
                    return await service.call(tool, args, ctx)

                nursery.start_soon(run_agent, record, call, _plan(spec))


async def _remote(spec: dict[str, Any], records: list[Record]) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def agent(record: Record, token: str, opened: trio.MemorySendChannel[str], started: trio.Event) -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                      timeout=httpx2.Timeout(60, read=300)) as http, \
                Client(streamable_http_client(spec["url"], http_client=http), mode="legacy") as client:

            async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
                result = await client.call_tool("m3_call", {"tool": tool, "args": args})
                body = result.structured_content or {}
                if result.is_error:
                    raise RuntimeError(json.dumps(body.get("error", body)))
                inner: dict[str, Any] = body["result"]
                return inner

            await client.list_tools()
            await opened.send(record.agent)
            await started.wait()
            await run_agent(record, call, _plan(spec))

    started = trio.Event()
    send, receive = trio.open_memory_channel[str](len(records))
    async with trio.open_nursery() as nursery:
        for record, token in zip(records, spec["tokens"], strict=True):
            nursery.start_soon(agent, record, token, send, started)
        for _ in records:  # every session is open before this process says it is ready
            await receive.receive()
        await trio.to_thread.run_sync(_ready_then_wait)
        started.set()


def _plan(spec: dict[str, Any]) -> Plan:
    return Plan(ops=spec["ops"], peers=tuple(spec["peers"]), seed=spec["seed"],
                abandon_share=spec["abandon_share"], short_lease_s=spec["short_lease_s"])


def _ready_then_wait() -> None:
    print("ready", flush=True)
    sys.stdin.readline()


def child_main(role: str, spec: dict[str, Any]) -> None:
    records = [Record(agent=name, surface=role) for name in spec["agents"]]
    trio.run(_direct if role == "direct" else _remote, spec, records)
    print(json.dumps([asdict(r) for r in records]), flush=True)


if __name__ == "__main__":
    child_main(sys.argv[1], json.loads(sys.argv[2]))
