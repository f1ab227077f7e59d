"""Embedding throughput: in process vs through ``m3 embedder serve``, with one and several client processes.

``python -m benchmarks.embed_throughput [--texts 384] [--clients 1,2,4]``

Every measurement uses separate client *processes* (as separate m3 processes on one machine would be):

* ``in-process xN`` — N processes, each loading its own MiniLM and embedding its share of the texts in
  batches of ``embed.max_batch`` (32), all at once: what N m3 processes do without a shared server.
* ``server xN`` — one ``m3 embedder serve`` (started by this script on a free port) and N processes
  embedding their shares through it with m3's HTTP backend (``X-M3-Priority: background``).
* ``query latency under load`` — while two clients keep the server busy with large background requests
  (256 texts each, i.e. 8 queued chunks of 32), one client sends single-text queries one after the other,
  first marked ``interactive`` (served ahead of the queued chunks), then marked ``background`` (queued
  behind them): p50 / p95 milliseconds.

Throughput is texts over wall time from "go" (every client loaded and waiting) to the last client's end.
Memory is each client's peak resident set (``ru_maxrss``): a process with its own model holds it, a
client of the server does not. Texts are synthetic memory-like sentences of 6-80 words, deterministic.
Results: ``benchmarks/results/<time>-embed_throughput/summary.json``; the table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.latency import percentiles_ms
from benchmarks.report import RunDir, rows_text

_PHRASE = ("the deploy key rotates every monday and the backup runs at night while coffee beans stay in the blue "
         "tin near the kitchen window because sourdough needs a warm place bicycle tyres lose pressure in "
         "winter taxes are due in july meetings move to thursday when the release slips the garden needs "
         "water at dawn receipts go into the grey folder")
WORDS = tuple(_PHRASE.split(" "))
BATCH = 32


def texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 80))).capitalize() + "." for _ in range(n)]


# ---------------------------------------------------------------- client processes


def worker(args: argparse.Namespace) -> None:
    """One client process: load, say ready, wait for go, embed (or query), report JSON on stdout."""
    from m3.embed.http import HttpEmbedder
    from m3.embed.minilm import MiniLMEmbedder

    mine = texts(args.texts, seed=args.seed)
    if args.url:
        embedder: Any = HttpEmbedder(args.url, args.model, client_id=f"bench-{os.getpid()}", priority=args.priority)
        embedder.embed(["warm-up"])
    else:
        embedder = MiniLMEmbedder(threads=args.threads, max_batch=BATCH)
        embedder.load()
    print("ready", flush=True)
    sys.stdin.readline()
    latencies: list[float] = []
    start = time.perf_counter()
    if args.queries:
        for text in mine[: args.queries]:
            t0 = time.perf_counter()
            embedder.embed([text])
            latencies.append(time.perf_counter() - t0)
    else:
        for i in range(0, len(mine), args.request):
            embedder.embed(mine[i : i + args.request])
    seconds = time.perf_counter() - start
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"texts": args.queries or len(mine), "seconds": seconds, "rss_mib": rss_mib,
                      "latencies": latencies}), flush=True)


def spawn(texts_each: int, seed: int, *, url: str = "", priority: str = "background", queries: int = 0,
          threads: int = 1, request: int = BATCH) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "benchmarks.embed_throughput", "--worker", "--texts", str(texts_each),
           "--seed", str(seed), "--priority", priority, "--queries", str(queries), "--threads", str(threads),
           "--request", str(request)]
    if url:
        cmd += ["--url", url]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def run_clients(clients: list[subprocess.Popen[str]]) -> tuple[float, list[dict[str, Any]]]:
    """Wait until every client is ready, start them together; (wall seconds, their reports)."""
    for c in clients:
        assert c.stdout is not None
        if c.stdout.readline().strip() != "ready":
            raise SystemExit("a client failed to start")
    start = time.perf_counter()
    for c in clients:
        assert c.stdin is not None
        c.stdin.write("go\n")
        c.stdin.flush()
    reports = []
    for c in clients:
        assert c.stdout is not None
        reports.append(json.loads(c.stdout.readline()))
        c.wait()
    return time.perf_counter() - start, reports


def throughput_row(mode: str, n: int, wall: float, reports: list[dict[str, Any]]) -> dict[str, Any]:
    total = sum(r["texts"] for r in reports)
    return {"mode": mode, "clients": n, "texts": total, "wall_s": round(wall, 2),
            "texts_per_s": round(total / wall, 1), "client_rss_mib": round(max(r["rss_mib"] for r in reports))}


# ---------------------------------------------------------------- the server


def start_server(port: int) -> subprocess.Popen[str]:
    env = dict(os.environ)
    m3 = str(Path(sys.executable).with_name("m3"))
    server = subprocess.Popen([m3, "embedder", "serve", "--port", str(port)], env=env, text=True,
                              stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert server.stderr is not None
    for line in server.stderr:
        if "serving" in line:
            return server
    raise SystemExit("m3 embedder serve did not start")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=384, help="Texts per measurement (split among clients).")
    parser.add_argument("--clients", default="1,2,4", help="Client process counts to measure (empty: none).")
    parser.add_argument("--load-texts", type=int, default=768, help="Texts each of the 2 load clients sends.")
    parser.add_argument("--queries-under-load", type=int, default=20, help="Queries timed under load.")
    parser.add_argument("--queries", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="all-MiniLM-L6-v2-int8", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=7, help=argparse.SUPPRESS)
    parser.add_argument("--priority", default="background", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--request", type=int, default=BATCH, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    with RunDir("embed_throughput") as run:
        summary = measure(args)
        run.summary(summary)
        print(f"results: {run.path}")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run every measurement, print the tables, return the summary body."""
    counts = [int(c) for c in args.clients.split(",") if c.strip()]
    cores = len(os.sched_getaffinity(0))
    rows: list[dict[str, Any]] = []
    for n in counts:
        # Each in-process client gets the threads m3 would give it (one less than the cores, at least 1).
        wall, reports = run_clients([spawn(args.texts // n, seed=i, threads=max(1, cores - 1)) for i in range(n)])
        rows.append(throughput_row("in-process", n, wall, reports))
        print(rows_text(rows[-1:], ""), file=sys.stderr)
    server = start_server(port := free_port())
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for n in counts:
            wall, reports = run_clients([spawn(args.texts // n, seed=i, url=url) for i in range(n)])
            rows.append(throughput_row("server", n, wall, reports))
            print(rows_text(rows[-1:], ""), file=sys.stderr)
        latency = []
        for priority in ("interactive", "background"):
            # Large requests (a re-embedding through the server): each fills the queue with 8 chunks.
            # The load outlasts the probe's queries, so every query meets a busy server.
            load = [spawn(args.load_texts, seed=10 + i, url=url, request=8 * BATCH) for i in range(2)]
            probe = spawn(args.queries_under_load, seed=99, url=url, priority=priority,
                          queries=args.queries_under_load)
            _wall, reports = run_clients([*load, probe])
            ms = percentiles_ms(reports[-1]["latencies"])
            latency.append({"queries_marked": priority, "queries": args.queries_under_load, **ms})
        memory = {"server_rss_mib": round(server_rss_mib(server.pid))}
    finally:
        server.terminate()
        server.wait(timeout=60)
    print(rows_text(rows, "embedding throughput (texts/s; client_rss_mib = largest client's peak memory)"))
    print(rows_text(latency, "single-text query latency through the server while 2 clients send batches (ms)"))
    print(json.dumps(memory))
    return {"texts": args.texts, "batch": BATCH, "load_texts": args.load_texts, "throughput": rows,
            "query_latency_under_load": latency, **memory}


if __name__ == "__main__":
    main()
