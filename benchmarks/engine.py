"""The engine (one per store) against every process running its own actors (embedded mode).

``python -m benchmarks.engine`` measures, in one run on one SQLite store per part (real MiniLM embedder):

1. 16 ``m3`` processes as MCP stdio servers, each driven by an official SDK client, 40 ``memory_write`` each:
   acknowledged writes and the longest wait, with the engine and in embedded mode (``--modes``). Each client
   lists the tools on connecting and, unless ``--cold``, makes one untimed write before the burst (see
   :func:`writers`). Also the CPU time per call of the front-ends, of the clients (this process) and of the
   engine by thread, full garbage collections during the burst, and when the 10 longest calls began.
2. One-shot CLI ``m3 memory write`` and ``m3 memory search`` with a running engine: p50/p99 of each process
   end to end (start-up included).
3. Cross-process wake: a ``notifications_wait`` in one stdio front-end, a ``notify`` from another; the time
   from the notify's acknowledgement (and from its sending) to the wait's answer, p50/p99.
4. Resident memory (VmRSS) with 8 connected MCP clients: the engine plus 8 front-ends against 8 embedded
   processes, each having written and searched once (model and vector matrix loaded), on a store prefilled
   with ``--memories`` distinct LongMemEval_S turns (default 100,000; written through the Writer in the
   benchmark process before any ``m3`` starts, with pseudo-random unit vectors of the configured model in
   place of model runs — resident memory does not depend on the vectors' values).

``--parts`` picks some of writers, oneshot, wake, rss (default all).

The summary (JSON) goes to stdout and ``benchmarks/results/<UTC time>-engine/summary.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
M3 = shutil.which("m3", path=str(Path(sys.executable).parent)) or "m3"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1) if ordered else float("nan")


def home_env(home: Path, mode: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
    env.update({"M3_HOME": str(home), "M3_ENGINE_MODE": mode, "PYTHONPATH": str(ROOT), **extra})
    return env


def stop_engine(env: dict[str, str]) -> None:
    subprocess.run([M3, "engine", "stop"], env=env, capture_output=True, timeout=180, check=False)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def engine_pid(env: dict[str, str]) -> int | None:
    done = subprocess.run([M3, "engine", "status"], env=env, capture_output=True, text=True, timeout=60, check=False)
    try:
        pid = json.loads(done.stdout).get("pid")
    except ValueError:
        return None
    return pid if isinstance(pid, int) else None


def engine_threads(env: dict[str, str]) -> dict[str, float]:
    """CPU seconds so far of each of the engine's threads (its statistics route), as ``engine:<thread>``."""
    from m3.config import load_config
    from m3.gateway.engine.client import STATS_PATH, request
    from m3.gateway.engine.paths import engine_paths

    try:
        _status, body = request(engine_paths(load_config(env)).sock, "GET", STATS_PATH, timeout=30)
    except Exception:  # the figure is then missing, not the run
        return {}
    threads = {f"engine:{name}": seconds for name, seconds in (body or {}).get("thread_cpu_s", {}).items()}
    collections = (body or {}).get("gc_collections")
    return {**threads, **({"engine_gc_full": float(collections[2])} if collections else {})}


def cpu_snapshot(env: dict[str, str], mode: str) -> dict[str, float]:
    """CPU seconds so far of the front-ends (this process's children), the engine (in all, and by thread) and
    this process (the SDK clients); per-call CPU is the difference of two snapshots over the calls."""
    snap = {"front_ends": sum(cpu_s(pid) for pid in children(os.getpid())), "clients": cpu_s(os.getpid()),
            "clients_gc_full": float(gc.get_stats()[2]["collections"])}
    pid = engine_pid(env) if mode == "engine" else None
    if pid is not None:
        snap["engine"] = cpu_s(pid)
        snap.update(engine_threads(env))
    return snap


async def writers(env: dict[str, str], processes: int, writes: int, mode: str = "engine",
                  cold: bool = False) -> dict[str, Any]:
    """``processes`` stdio m3 processes (SDK clients), ``writes`` memory_write each, all at once; with the CPU
    time each kind of process spent per call during the burst.

    Unless ``cold``, each client makes one untimed ``memory_write`` before the burst, as an agent that has
    been at work: an SDK client's first call imports ``jsonschema`` and compiles the tool's output-schema
    validator (about 0.1 s and 20 ms here), and with all clients in this one process those 16 first calls
    queue behind each other, a cost of this harness and of the client, not of m3."""
    waits: list[float] = []
    ok = 0
    failures: list[str] = []
    go = trio.Event()
    stop = trio.Event()
    spans: list[tuple[float, float]] = []  # (start, wait) of every call: when the slow ones began

    async def one(index: int, ready: trio.MemorySendChannel[int]) -> None:
        nonlocal ok
        params = StdioServerParameters(command=M3, args=[], env={**env, "M3_IDENTITY_AGENT_ID": f"writer-{index}"})
        async with Client(params, mode="legacy") as client:
            await client.list_tools()  # as an MCP host does on connecting, to show its model the tools
            if not cold:
                await client.call_tool("memory_write", {"content": f"Process {index} starts its work.",
                                                         "type": "observation"})
            await ready.send(index)
            await go.wait()
            for i in range(writes):
                begun = time.perf_counter()
                result = await client.call_tool("memory_write", {
                    "content": f"Process {index} records observation number {i} about the shared project.",
                    "type": "observation"})
                waits.append(time.perf_counter() - begun)
                spans.append((begun, waits[-1]))
                if result.is_error:
                    failures.append(str(result.content)[:200])
                else:
                    ok += 1
            await stop.wait()

    begun = time.perf_counter()
    send, receive = trio.open_memory_channel[int](processes)
    async with trio.open_nursery() as nursery:
        for index in range(processes):
            nursery.start_soon(one, index, send)
        for _ in range(processes):
            await receive.receive()
        connected = time.perf_counter() - begun
        before = cpu_snapshot(env, mode)
        started = time.perf_counter()
        go.set()
        while len(waits) < processes * writes:  # the clients stay connected until the CPU is read
            await trio.sleep(0.01)
        took = time.perf_counter() - started
        after = cpu_snapshot(env, mode)
        stop.set()
    calls = max(1, len(waits))
    counts = {k: int(after.pop(k) - before.pop(k)) for k in list(after) if k.endswith("_gc_full") and k in before}
    return {"acknowledged": ok, "expected": processes * writes, "failures": failures[:3],
            "max_wait_ms": pct(waits, 1.0), "p50_ms": pct(waits, 0.5), "p99_ms": pct(waits, 0.99),
            "writes_per_s": round(ok / took, 1), "connect_s": round(connected, 2),
            "cpu_ms_per_call": {k: round((after[k] - before[k]) * 1000 / calls, 2) for k in after if k in before},
            "gc_full_collections_during_burst": counts,
            # The 10 longest calls, [ms after the burst began, wait ms]: many starting together is one stall.
            "slowest": [[round((at - started) * 1000), round(wait * 1000, 1)] for at, wait in sorted(
                spans, key=lambda span: -span[1])[:10]],
            "load_average_after": [round(x, 2) for x in os.getloadavg()]}


def one_shot(env: dict[str, str], runs: int) -> dict[str, Any]:
    def timed(*argv: str, program: str = M3) -> float:
        begun = time.perf_counter()
        done = subprocess.run([program, *argv], env=env, capture_output=True, text=True, timeout=120, check=False)
        took = time.perf_counter() - begun
        assert done.returncode == 0, done.stderr
        return took

    timed("memory", "write", "--content", "warm-up write: the model loads here")
    timed("memory", "search", "--query", "warm-up")
    write = [timed("memory", "write", "--content", f"one-shot note {i} about the quarterly plan") for i in range(runs)]
    search = [timed("memory", "search", "--query", f"quarterly plan note {i}") for i in range(runs)]
    bare = [timed("-c", "pass", program=sys.executable) for _ in range(runs)]
    return {"runs": runs, "write_p50_ms": pct(write, 0.5), "write_p99_ms": pct(write, 0.99),
            "search_p50_ms": pct(search, 0.5), "search_p99_ms": pct(search, 0.99),
            "python_c_pass_p50_ms": pct(bare, 0.5)}


async def wake(env: dict[str, str], rounds: int) -> dict[str, Any]:
    from_ack: list[float] = []
    from_send: list[float] = []
    waiter_params = StdioServerParameters(command=M3, args=[], env={**env, "M3_IDENTITY_AGENT_ID": "waiter"})
    sender_params = StdioServerParameters(command=M3, args=[], env={**env, "M3_IDENTITY_AGENT_ID": "sender"})
    async with AsyncExitStack() as stack:
        waiter = await stack.enter_async_context(Client(waiter_params, mode="legacy"))
        sender = await stack.enter_async_context(Client(sender_params, mode="legacy"))
        for who in (waiter, sender):
            await who.call_tool("m3_call", {"tool": "agent_register", "args": {}})
        for i in range(rounds):
            got: dict[str, float] = {}

            async def wait(got: dict[str, float] = got) -> None:
                result = await waiter.call_tool("m3_call", {"tool": "notifications_wait", "args": {"timeout": 10}})
                got["woke"] = time.perf_counter()
                items = json.loads(result.content[0].text)["result"]["items"]  # type: ignore[union-attr]
                await waiter.call_tool("m3_call", {"tool": "notifications_ack", "args": {
                    "ids": [n["id"] for n in items]}})

            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait)
                await trio.sleep(0.15)  # let the wait park in the engine before the notify is sent
                got["sent"] = time.perf_counter()
                await sender.call_tool("m3_call", {"tool": "notify", "args": {"to_agent": "waiter",
                                                                               "message": f"round {i}"}})
                got["acked"] = time.perf_counter()
            from_ack.append(max(0.0, got["woke"] - got["acked"]))
            from_send.append(got["woke"] - got["sent"])
    return {"rounds": rounds, "after_ack_p50_ms": pct(from_ack, 0.5), "after_ack_p99_ms": pct(from_ack, 0.99),
            "after_send_p50_ms": pct(from_send, 0.5), "after_send_p99_ms": pct(from_send, 0.99)}


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry.name))
    return found


async def resident(env: dict[str, str], clients: int, engine: bool) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        for index in range(clients):
            params = StdioServerParameters(command=M3, args=[], env={**env, "M3_IDENTITY_AGENT_ID": f"rss-{index}"})
            client = await stack.enter_async_context(Client(params, mode="legacy"))
            await client.call_tool("memory_write", {"content": f"resident memory check {index}"})
            await client.call_tool("memory_search", {"query": "resident memory"})
        front_ends = children(os.getpid())
        total = sum(rss_kb(pid) for pid in front_ends)
        result: dict[str, Any] = {"processes": len(front_ends), "front_ends_mb": round(total / 1024, 1)}
        if engine:
            status = json.loads(subprocess.run([M3, "engine", "status"], env=env, capture_output=True, text=True,
                                               timeout=60, check=True).stdout)
            result["engine_mb"] = round(rss_kb(status["pid"]) / 1024, 1)
            total += rss_kb(status["pid"])
        result["total_mb"] = round(total / 1024, 1)
    return result


def prefill(env: dict[str, str], memories: int, data: Path) -> dict[str, Any]:
    """Fill the store of ``env``'s M3_HOME with ``memories`` distinct turns and their vectors (synthetic)."""
    from benchmarks.embedding import cached_embedder
    from benchmarks.ingest import write_turns
    from benchmarks.perf_search import corpus
    from benchmarks.precomputed import PrecomputedEmbedder
    from m3.actors.system import ActorSystem
    from m3.config import load_config

    started = time.perf_counter()
    turns, _ = corpus(data, memories, 0)
    vectors = PrecomputedEmbedder(cached_embedder())
    config = load_config(env).with_overrides(actors__ask_timeout_s=3600.0)
    system = ActorSystem(config, vectors).start()
    try:
        for start in range(0, len(turns), 1000):
            write_turns(system, turns[start:start + 1000], batch=1000)
        system.wait_embedded(3600.0)
    finally:
        system.stop()
    return {"memories": memories, "vectors_synthetic": vectors.synthetic, "vectors_cached": vectors.cached,
            "fill_s": round(time.perf_counter() - started, 1)}


def rss_part(tmp: Path, ns: argparse.Namespace) -> dict[str, Any]:
    """Resident memory of both modes on copies of one prefilled store."""
    out: dict[str, Any] = {}
    filled = tmp / "rss-filled"
    if ns.memories:
        print(f"prefill {ns.memories} memories …", file=sys.stderr)
        out["rss_prefill"] = prefill(home_env(filled, "embedded"), ns.memories, ns.data)
    for mode in ("engine", "embedded"):
        home = tmp / f"rss-{mode}"
        if ns.memories:
            shutil.copytree(filled, home)
        # Entity indexing off in both modes: in embedded mode each of the 8 processes would index the whole
        # prefilled store at once, and on SQLite their write transactions lock each other out (docs/benchmarks.md).
        env = home_env(home, mode, M3_ENTITIES_ENABLED="false")
        print(f"resident memory, {mode} …", file=sys.stderr)
        out[f"rss_{mode}"] = trio.run(resident, env, ns.clients, mode == "engine")
        stop_engine(env)
    out["rss_ratio_embedded_over_engine"] = round(out["rss_embedded"]["total_mb"] / out["rss_engine"]["total_mb"], 2)
    return out


PARTS = ("writers", "oneshot", "wake", "rss")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--writes", type=int, default=40)
    parser.add_argument("--runs", type=int, default=20, help="one-shot commands of each kind")
    parser.add_argument("--rounds", type=int, default=50, help="notify → wait rounds")
    parser.add_argument("--clients", type=int, default=8, help="connected MCP clients for the memory figure")
    parser.add_argument("--memories", type=int, default=100_000, help="memories in the store of the memory figure")
    parser.add_argument("--data", type=Path, default=None, help="the benchmark data (default ../shared/data)")
    parser.add_argument("--cold", action="store_true",
                        help="no untimed first call per client before the writers' burst (see writers())")
    parser.add_argument("--modes", default="engine,embedded", help="the writers part's modes (engine, embedded)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"some of {','.join(PARTS)}")
    ns = parser.parse_args()
    parts = set(ns.parts.split(","))
    if ns.data is None:
        from benchmarks.data import default_data_dir

        ns.data = default_data_dir()
    summary: dict[str, Any] = {"started": datetime.now(UTC).isoformat(), "cpus": os.cpu_count(),
                               "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
                               "python": sys.version.split()[0], "args": {k: str(v) if isinstance(v, Path) else v
                                                                         for k, v in vars(ns).items()}}
    with tempfile.TemporaryDirectory(prefix="m3-engine-bench-") as tmp:
        if "writers" in parts:
            for mode in ns.modes.split(","):
                env = home_env(Path(tmp) / f"writers-{mode}", mode)
                print(f"writers, {mode} …", file=sys.stderr)
                summary[f"writers_{mode}"] = trio.run(writers, env, ns.processes, ns.writes, mode, ns.cold)
                stop_engine(env)
            if "writers_engine" in summary and "writers_embedded" in summary:
                e, m = summary["writers_engine"], summary["writers_embedded"]
                summary["writers_ratio_max_wait_embedded_over_engine"] = round(m["max_wait_ms"] / e["max_wait_ms"],
                                                                               2)
        if parts & {"oneshot", "wake"}:
            env = home_env(Path(tmp) / "oneshot", "engine")
            if "oneshot" in parts:
                print("one-shot commands …", file=sys.stderr)
                summary["one_shot_engine"] = one_shot(env, ns.runs)
            if "wake" in parts:
                print("wake …", file=sys.stderr)
                summary["wake"] = trio.run(wake, env, ns.rounds)
            stop_engine(env)
        if "rss" in parts:
            summary.update(rss_part(Path(tmp), ns))
    summary["finished"] = datetime.now(UTC).isoformat()
    summary["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    out = ROOT / "benchmarks" / "results" / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-engine"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
