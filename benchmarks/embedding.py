"""The embedder every benchmark uses: offline MiniLM behind a persistent cache.

The cache file lives outside the project (``~/.cache/m3-bench/embeddings.sqlite``
unless ``--cache`` or ``M3_BENCH_CACHE`` says otherwise), so reruns only
embed texts never seen before.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.cache import CachingEmbedder
from benchmarks.progress import Progress
from m3.embed.minilm import MiniLMEmbedder


def default_cache_path() -> Path:
    explicit = os.environ.get("M3_BENCH_CACHE")
    return Path(explicit).expanduser() if explicit else Path.home() / ".cache" / "m3-bench" / "embeddings.sqlite"


def cached_embedder(path: Path | None = None, threads: int | None = None) -> CachingEmbedder:
    inner = MiniLMEmbedder(threads=threads)
    return CachingEmbedder(inner, path or default_cache_path())


def describe(embedder: CachingEmbedder) -> dict[str, object]:
    return {"model": embedder.model_id, "dim": embedder.dim, "cache": str(embedder.path),
            "cache_hits": embedder.stats.hits, "cache_misses": embedder.stats.misses}


def prewarm(embedder: CachingEmbedder, texts: list[str], chunk: int = 512) -> int:
    """Embed ``texts`` into the cache in large calls (the backend sorts each call by length, so
    little is wasted on padding); return how many were missing. Later embeds of them are hits."""
    before = embedder.stats.misses
    unique = list(dict.fromkeys(texts))
    bar = Progress("embedding", len(unique), every_s=30.0) if len(unique) > 4 * chunk else None
    for start in range(0, len(unique), chunk):
        embedder.embed(unique[start : start + chunk])
        if bar is not None:
            bar.update(min(chunk, len(unique) - start), note=f"misses={embedder.stats.misses - before}")
    if bar is not None:
        bar.close()
    return embedder.stats.misses - before
