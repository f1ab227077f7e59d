"""A query's embedding right after the embedding thread has idled for a while, against back to back.

``python -m benchmarks.embed_idle [--queries 200] [--gaps 0,1,3,5,20] [--threads 1]``: the packaged MiniLM
model embeds LongMemEval_S questions one at a time on a helper thread, as the Searcher embeds its query
(:mod:`m3.retrieval.query_embedding`); before each one the caller sleeps ``gap`` milliseconds (0: the next
query is handed over as soon as the last is back). Every question is embedded once per gap, the gaps taken in
a shuffled order per question, so a drift of the machine during the run reaches every gap alike. Prints
p50/p95 of the embedding alone (the sleep not counted) per gap and the ratio of each median to the
back-to-back one.

Why: the search benchmarks time searches back to back, while an agent's searches come seconds apart. On a
virtual machine whose processor is idle between two queries, the next one may start on a cold core; this says
how much of a live search's time that costs here, beside what the code does.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.data import default_data_dir
from benchmarks.latency import percentiles_ms, ratio
from benchmarks.perf_search import corpus
from benchmarks.report import rows_text
from m3.embed.minilm import MiniLMEmbedder


def measure(queries: list[str], gaps_ms: list[float], threads: int) -> list[dict[str, Any]]:
    embedder = MiniLMEmbedder(threads=threads)
    order = random.Random(19)
    took: dict[float, list[float]] = {gap: [] for gap in gaps_ms}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-idle") as helper:
        for query in queries[:20]:  # load the model and warm up
            helper.submit(embedder.embed, [query]).result()
        for query in queries:
            for gap in order.sample(gaps_ms, len(gaps_ms)):
                if gap:
                    time.sleep(gap / 1000)
                started = time.perf_counter()
                helper.submit(embedder.embed, [query]).result()
                took[gap].append(time.perf_counter() - started)
    base = statistics.median(took[min(gaps_ms)])
    return [{"idle_before_ms": gap, "queries": len(v), **percentiles_ms(v),
             "p50_x": ratio(statistics.median(v), base)} for gap, v in took.items()]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--gaps", default="0,1,3,5,20", help="idle milliseconds before a query, comma-separated")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime threads (m3's rule on two cores: 1)")
    args = parser.parse_args(argv)
    _, queries = corpus(args.data, 1, args.queries)
    rows = measure(queries, sorted({float(g) for g in args.gaps.split(",")}), args.threads)
    print(rows_text(rows, "one query's embedding on a helper thread, after the thread idled"))
    return rows


if __name__ == "__main__":
    main()
