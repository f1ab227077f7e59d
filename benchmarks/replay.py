"""Re-rank dumped candidate pools with m3's own fusion and MMR under other settings (tuning aid).

``python -m benchmarks.replay POOLS.pkl --level session --set search.weight_conversation=0``
reads pools written by ``benchmarks.pools`` and, for each question, runs
:func:`m3.retrieval.ranking.fuse` and :func:`m3.retrieval.ranking.mmr` with m3's
default search settings changed by ``--set`` (any number), then prints the
hit rate at each k, overall and per type. Only the ranking is replayed: the
candidates are what the real Searcher found with the default
``search.candidates``. Reported figures come from the real benchmarks.
"""

from __future__ import annotations

import argparse
import pickle
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.ingest import bench_config
from benchmarks.retrieval import int_list
from m3.actors.system import search_weights
from m3.protocols.messages.memory import SearchWeights
from m3.retrieval import ranking, timewords


def weights_with(settings: list[str]) -> SearchWeights:
    """m3's default search weights with ``key=value`` settings applied."""
    overrides = dict(s.split("=", 1) for s in settings)
    with tempfile.TemporaryDirectory() as tmp:
        config = bench_config(Path(tmp)).with_overrides(**{k.replace(".", "__"): v for k, v in overrides.items()})
    return search_weights(config)


def replay(pools: list[dict[str, Any]], weights: SearchWeights, ks: list[int],
           level: str) -> tuple[dict[str, dict[int, float]], dict[str, int]]:
    """Hit rate per type and k of ``pools`` re-ranked with ``weights`` (level: "session" or "turn")."""
    hits: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    count: dict[str, int] = defaultdict(int)
    for q in pools:
        # The question's date when the pool has one (relative times and recency count from it).
        now = q.get("question_date") or datetime.now(UTC)
        cands = [ranking.Candidate(id=c["id"], row=c["row"], cosine=c["cosine"], bm25=c["bm25"], vector=c["vector"])
                 for c in q["cands"]]
        label = {c["id"]: c[level] for c in q["cands"]}
        gold = q["gold_sessions"] if level == "session" else q["gold_turns"]
        named = timewords.windows(q["question"], now)
        for group in ("overall", q["qtype"]):
            count[group] += 1
        for k in ks:
            # As a search for k does: the proximity signal is read for the head of k's pool.
            ranking.fuse(cands, q["terms"], weights, now, named)
            ranking.add_proximity(cands, q["terms"], weights, k, named)
            hit = any(label[c.id] in gold for c in ranking.mmr(cands, k, weights.mmr_lambda))
            for group in ("overall", q["qtype"]):
                hits[group][k] += hit
    return {g: {k: hits[g][k] / count[g] for k in ks} for g in count}, dict(count)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pools", type=Path, nargs="+")
    parser.add_argument("--level", choices=("session", "turn"), default="session")
    parser.add_argument("--k", default="1,5,10,20")
    parser.add_argument("--set", action="append", default=[], help="search setting override, key=value")
    args = parser.parse_args(argv)
    pools: list[dict[str, Any]] = []
    for path in args.pools:
        with path.open("rb") as fh:
            pools.extend(pickle.load(fh))
    ks = int_list(args.k)
    rates, count = replay(pools, weights_with(args.set), ks, args.level)
    for group in ["overall", *sorted(g for g in rates if g != "overall")]:
        print(f"{group:28s} n={count[group]:4d} " + " ".join(f"@{k}={rates[group][k]:.3f}" for k in ks))


if __name__ == "__main__":
    main()
