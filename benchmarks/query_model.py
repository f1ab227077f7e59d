"""Where one query's embedding spends its time: the offline model's operators, per onnxruntime thread count.

``python -m benchmarks.query_model [--queries 200] [--threads 1,2]``: the packaged MiniLM model (the offline
default) embeds LongMemEval_S questions one at a time, as a search embeds its query: first timed end to end
(tokenizing, the model, pooling), then once more with onnxruntime's profiler on, which gives each operator
type's share of the model's kernel time. The package ships int8 weights that the graph turns back into float32
before its matrix products (``Cast`` and ``Mul`` into ``MatMul``), so after onnxruntime's constant folding the
products run in float32: their share says how much of a query is arithmetic no code around the model can save.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.data import default_data_dir
from benchmarks.perf_search import corpus
from benchmarks.report import rows_text
from m3.embed import minilm


def _profile(threads: int, queries: list[str]) -> dict[str, float]:
    """Microseconds per query of each operator type, from onnxruntime's profiler."""
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        options.profile_file_prefix = str(Path(tmp) / "query")
        session = ort.InferenceSession(str(minilm.model_file()), sess_options=options,
                                       providers=["CPUExecutionProvider"])
        tokenizer = minilm._load_runtime(minilm.model_file(), threads, minilm.DEFAULT_MAX_TOKENS).tokenizer
        for query in queries:
            ids = np.array([tokenizer.encode(query).ids], dtype=np.int64)
            session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                               "token_type_ids": np.zeros_like(ids)})
        events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
    per_op: collections.Counter[str] = collections.Counter()
    for ev in events:
        if ev.get("cat") == "Node" and str(ev.get("name", "")).endswith("_kernel_time"):
            per_op[ev["args"]["op_name"]] += ev["dur"]
    return {op: us / len(queries) for op, us in per_op.items()}


def measure(threads: int, queries: list[str]) -> dict[str, Any]:
    embedder = minilm.MiniLMEmbedder(threads=threads)
    for query in queries[:20]:
        embedder.embed([query])
    took = []
    for query in queries:
        started = time.perf_counter()
        embedder.embed([query])
        took.append((time.perf_counter() - started) * 1000)
    ops = _profile(threads, queries)
    kernels = sum(ops.values())
    matmul = sum(us for op, us in ops.items() if "MatMul" in op)
    top = sorted(ops.items(), key=lambda kv: -kv[1])[:3]
    return {"threads": threads, "queries": len(queries), "p50_ms": round(statistics.median(took), 2),
            "min_ms": round(min(took), 2), "kernels_ms": round(kernels / 1000, 2),
            "matmul_ms": round(matmul / 1000, 2), "matmul_share": round(matmul / kernels, 3),
            "top_ops": ", ".join(f"{op} {us / 1000:.2f}" for op, us in top)}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args(argv)
    _, queries = corpus(args.data, 1, args.queries)
    rows = [measure(int(t), queries) for t in args.threads.split(",")]
    print(rows_text(rows, "one query's embedding (MiniLM int8 package, onnxruntime CPU)"))
    return rows


if __name__ == "__main__":
    main()
