"""Fill the embedding cache with every text a retrieval benchmark will embed.

``python -m benchmarks.warm_cache [--sets locomo,oracle,s]`` embeds (through
:class:`benchmarks.cache.CachingEmbedder`) the questions first, then the turns,
small sets first and LongMemEval_S haystack by haystack, so that runs with
``--limit`` find their texts early. Safe to run beside a benchmark: both
share the cache file. Run it under ``nice`` on a shared machine.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from benchmarks.cache import text_key
from benchmarks.data import Haystack, default_data_dir, load_locomo, load_longmemeval
from benchmarks.embedding import cached_embedder, default_cache_path
from benchmarks.progress import Progress


def texts_of(sets: list[str], data_dir: Path) -> Iterator[str]:
    """Question texts of every set, then turn texts set by set, each text once."""
    loaded: list[list[Haystack]] = []
    for name in sets:
        loaded.append(load_locomo(data_dir) if name == "locomo" else load_longmemeval(data_dir, name))
    seen: set[bytes] = set()
    questions = (q.text for stacks in loaded for h in stacks for q in h.questions)
    turns = (t.content for stacks in loaded for h in stacks for t in h.turns)
    for text in (*questions, *turns):
        key = text_key(text)
        if key not in seen:
            seen.add(key)
            yield text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    parser.add_argument("--sets", default="locomo,oracle,s", help="comma-separated: locomo, oracle, s")
    parser.add_argument("--chunk", type=int, default=512, help="texts per embed call")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: all CPUs)")
    args = parser.parse_args(argv)
    embedder = cached_embedder(args.cache, args.threads)
    texts = list(texts_of(args.sets.split(","), args.data))
    bar = Progress("warm cache", len(texts), every_s=30.0)
    for start in range(0, len(texts), args.chunk):
        chunk = texts[start : start + args.chunk]
        embedder.embed(chunk)
        bar.update(len(chunk), note=f"hits={embedder.stats.hits} misses={embedder.stats.misses}")
    bar.close()
    print(f"{embedder.count()} vectors of {embedder.model_id} in {embedder.path}")


if __name__ == "__main__":
    main()
