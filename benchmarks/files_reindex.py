"""Indexing a folder of files, then re-indexing it after every file changed: with and without migration 0016's
indexes.

``python -m benchmarks.files_reindex [--files 8000] [--store sqlite|postgres] [--arms with,without]``: a folder
of ``files`` Markdown files (six LongMemEval_S turns each, about five chunks) is indexed through
``Service.call("files_index")`` on a new store (vectors from ``PrecomputedEmbedder``: the model is not what is
measured), every file is then changed (a line appended) and the folder indexed again, which retires each file's
old chunks and writes new ones. Each arm runs on a store of its own; ``without`` drops the indexes migration
0016 added (``memories.source``; ``entities.merged_into``, ``tasks.result_memory_id``, ``inbox.task_id``, the
foreign keys that had none) right after the store is created. The entity pass runs in the background as in the
engine and hands its work to the same Writer, so a call also waits behind it; between the two calls the store
is let settle (vectors stored, the entity backlog worked off). Prints the seconds of both calls
per arm and the ratio of each arm's re-index to the first arm's.

``--baseline DIR`` (another checkout, e.g. ``git archive REV | tar -x -C DIR``) times instead the arm ``with`` in
that checkout and in this one, in turn for ``--rounds`` rounds, each in a subprocess (:mod:`benchmarks.checkouts`),
and prints each round's ratio of this checkout's re-index to the baseline's.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import trio
from sqlalchemy import text

from benchmarks.checkouts import in_turn
from benchmarks.data import default_data_dir
from benchmarks.embedding import cached_embedder
from benchmarks.ingest import STORES, bench_config, store_url
from benchmarks.perf_search import corpus, settle
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.report import rows_text
from m3.actors.system import ActorSystem
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from m3.store.engine import StoreOptions, open_engine

#: The indexes migration 0016 added, as (name, table).
ADDED = (("ix_memories_source", "memories"), ("ix_entities_merged_into", "entities"),
         ("ix_tasks_result_memory", "tasks"), ("ix_inbox_task", "inbox"))
TURNS_PER_FILE = 6
CALLER = CallContext(agent_id="bench")


def write_folder(root: Path, texts: list[str], files: int) -> list[Path]:
    """``files`` Markdown files under ``root`` (50 folders), each of TURNS_PER_FILE texts."""
    paths = []
    for i in range(files):
        path = root / f"d{i % 50}" / f"f{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n\n".join(texts[i * TURNS_PER_FILE:(i + 1) * TURNS_PER_FILE]), encoding="utf-8")
        paths.append(path)
    return paths


def drop_added(url: str) -> None:
    engine = open_engine(StoreOptions(url=url), "writer")
    try:
        with engine.begin() as conn:
            for name, _table in ADDED:
                conn.execute(text(f"DROP INDEX {name}"))
    finally:
        engine.dispose()


def timed_index(service: Service, folder: Path) -> tuple[float, dict[str, Any]]:
    async def call() -> Any:
        return await service.call("files_index", {"path": str(folder)}, CALLER)

    started = time.perf_counter()
    done = trio.run(call)
    return time.perf_counter() - started, done


def run_arm(arm: str, store: str, texts: list[str], files: int, cache: Path | None) -> dict[str, Any]:
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="m3-bench-files-")))
        paths = write_folder(tmp / "repo", texts, files)
        url = stack.enter_context(store_url(store, tmp))
        config = bench_config(tmp).with_overrides(store__url=url, actors__ask_timeout_s=3600.0)
        system = ActorSystem(config, PrecomputedEmbedder(cached_embedder(cache, 1))).start()
        stack.callback(system.stop, drain_embeddings=False)
        if arm == "without":
            drop_added(url)
        service = Service(system.config, system, default_registry())
        first_s, first = timed_index(service, tmp / "repo")
        settle(system)  # the first indexing's vectors and entities, so the second call starts from rest
        for path in paths:
            path.write_text(path.read_text(encoding="utf-8") + "\n\nedited\n", encoding="utf-8")
        again_s, again = timed_index(service, tmp / "repo")
        # Before the store goes away: the vectors. (The entity pass's backlog is left: without the indexes it
        # takes longer than the call.)
        system.wait_embedded(3600.0)
    return {"arm": arm, "store": store, "files": files, "chunks": first["chunks_written"],
            "first_index_s": round(first_s, 4), "reindex_s": round(again_s, 4),
            "retired": again["chunks_retired"], "rewritten": again["chunks_written"]}


#: One arm ``with`` in whichever checkout runs it (``benchmarks.checkouts.probe``): data folder, files, store,
#: embedding cache ("" for the default).
PROBE = """
import json, sys
from pathlib import Path
from benchmarks.files_reindex import TURNS_PER_FILE, run_arm
from benchmarks.perf_search import corpus
data, files, store, cache = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
turns, _ = corpus(data, files * TURNS_PER_FILE, 1)
print(json.dumps(run_arm("with", store, [turn.content for turn in turns], files, Path(cache) if cache else None)))
"""


def versions(baseline: Path, rounds: int, data: Path, files: int, store: str, cache: Path | None
             ) -> list[dict[str, Any]]:
    """The arm ``with`` in ``baseline`` and in this checkout, in turn: one row per version and round."""
    runs = in_turn(baseline, rounds, PROBE, str(data), str(files), store, str(cache or ""))
    rows = []
    for i, (before, after) in enumerate(zip(runs["before"], runs["after"], strict=True)):
        for name, row in (("baseline", before), ("this", after)):
            rows.append({"round": i + 1, "version": name, "files": files, "chunks": row["chunks"],
                         "first_index_s": row["first_index_s"], "reindex_s": row["reindex_s"],
                         "reindex_x": round(row["reindex_s"] / before["reindex_s"], 3)})
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--files", type=int, default=8000)
    parser.add_argument("--arms", default="with,without", help="comma-separated: with, without (the indexes)")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout, timed in turn with this one")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the two checkouts (with --baseline)")
    args = parser.parse_args(argv)
    if args.baseline is not None:
        rows = versions(args.baseline, args.rounds, args.data, args.files, args.store, args.cache)
        print(rows_text(rows, f"files_index twice, baseline {args.baseline} and this checkout in turn, "
                              f"{args.store}, {args.files} files"))
        return rows
    turns, _ = corpus(args.data, args.files * TURNS_PER_FILE, 1)
    texts = [turn.content for turn in turns]
    rows = [run_arm(arm, args.store, texts, args.files, args.cache) for arm in args.arms.split(",")]
    for row in rows:
        row["reindex_x"] = round(row["reindex_s"] / rows[0]["reindex_s"], 3)
    print(rows_text(rows, f"files_index, then again after every file changed, {args.store}, {args.files} files"))
    return rows


if __name__ == "__main__":
    main()
