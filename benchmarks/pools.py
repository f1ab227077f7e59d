"""Dump the fused candidate pools of real searches, to replay ranking variants offline (tuning aid).

``python -m benchmarks.pools --bench s --limit 130 --out /tmp/pools-s.pkl`` fills each store through
m3's write path exactly like the retrieval benchmarks, searches every question once with a real
Searcher, and records what that Searcher handed to :func:`m3.retrieval.ranking.fuse`: every candidate's
row fields, cosine, BM25 and vector, plus the query terms and the gold labels. ``benchmarks.replay``
then re-ranks those pools with any weights in milliseconds. The final figures always come from the
real benchmarks (``benchmarks.longmemeval``, ``benchmarks.locomo``), never from a replay.
"""

from __future__ import annotations

import argparse
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.data import default_data_dir, load_locomo, load_longmemeval
from benchmarks.embedding import cached_embedder, default_cache_path, prewarm
from benchmarks.ingest import fresh_system, ingest
from benchmarks.modes import SearchModes
from benchmarks.progress import Progress
from m3.retrieval import ranking, timewords

_ROW_FIELDS = ("title", "importance", "valid_from", "access_count", "pinned", "conversation_id", "content",
               "recorded_at")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", choices=("s", "oracle", "locomo"), required=True)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.bench == "locomo":
        haystacks = load_locomo(args.data)
    else:
        haystacks = load_longmemeval(args.data, args.bench, args.limit)
        if args.bench == "s":
            haystacks = haystacks[args.start:]
    embedder = cached_embedder(default_cache_path(), args.threads)
    captured: list[tuple[list[ranking.Candidate], list[str], list[dict[str, Any]]]] = []
    real_fuse = ranking.fuse

    def capture(cands: list[ranking.Candidate], terms: list[str], weights: Any, now: Any,
                named: Sequence[timewords.Window] = ()) -> None:
        # Copy the row fields here, in the Searcher's transaction: a lazily loaded field read later, from
        # this thread, would open a transaction on the Searcher's connection.
        captured.append((cands, terms, [{f: c.row[f] for f in _ROW_FIELDS} for c in cands]))
        real_fuse(cands, terms, weights, now, named)

    ranking.fuse = capture
    out: list[dict[str, Any]] = []
    bar = Progress("pools", sum(len(h.questions) for h in haystacks))
    for haystack in haystacks:
        prewarm(embedder, [q.text for q in haystack.questions] + [t.content for t in haystack.turns])
        with fresh_system(embedder) as system:
            by_id = ingest(system, haystack.turns)
            searchers = SearchModes(system, ["m3"])
            try:
                for q in haystack.questions:
                    captured.clear()
                    searchers.search("m3", q.text, args.k, q.date)
                    cands, terms, fields = captured[0]
                    out.append(_record(q, cands, fields, terms, by_id))
                    bar.update()
            finally:
                searchers.stop()
    bar.close()
    with args.out.open("wb") as fh:
        pickle.dump(out, fh)


def _record(q: Any, cands: list[ranking.Candidate], fields: list[dict[str, Any]], terms: list[str],
            by_id: dict[str, Any]) -> dict[str, Any]:
    return {
        "qid": q.qid, "qtype": q.qtype, "question": q.text, "question_date": q.date, "terms": terms,
        "gold_sessions": q.gold_sessions, "gold_turns": q.gold_turns,
        "cands": [{"id": c.id, "row": row, "cosine": c.cosine, "bm25": c.bm25,
                   "vector": None if c.vector is None else np.asarray(c.vector, dtype=np.float32),
                   "session": by_id[c.id].session_id, "turn": by_id[c.id].key, "role": by_id[c.id].role}
                  for c, row in zip(cands, fields, strict=True)],
    }


if __name__ == "__main__":
    main()
