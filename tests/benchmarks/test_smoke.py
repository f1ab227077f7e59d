"""The benchmark harness runs end to end on a few questions of each data set.

These check the plumbing (loading, ingestion through the Writer, every search
mode, logs and summaries), not retrieval quality: haystacks are trimmed and a
hash embedder stands in for the model, so the whole file runs in seconds.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from benchmarks import (
    backlog_count,
    embed_idle,
    engine_start,
    entity_index,
    files_reindex,
    gc_pauses,
    keyword_scale,
    loop_decay,
    perf_search,
    perf_search_ab,
    perf_search_stores,
    perf_vector_store,
    perf_write,
    pg_buffers,
    pg_dense_overlap,
    pg_nearest_ab,
    query_handover,
    query_model,
    row_reads,
    search_undo,
    successor_index,
    tool_reads,
    write_cpu,
)
from benchmarks.cache import CachingEmbedder
from benchmarks.data import Haystack, default_data_dir, load_locomo, load_longmemeval
from benchmarks.precomputed import synthetic_vector
from benchmarks.retrieval import run_benchmark
from benchmarks.summarize import table_from_log
from m3.retrieval import native, search_statements
from m3.retrieval.dense import SqlLeg
from m3.store import filters, postgres, sqlite
from m3.store.dialect import Dialect
from m3.store.sqlite import SqliteDialect
from tests.benchmarks.synthetic import write_dev_data

SHARED = default_data_dir()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Synthetic data in the shapes of the shared dev split (which CI does not have)."""
    return write_dev_data(tmp_path_factory.mktemp("bench-data"))


class HashEmbedder:
    """Deterministic unit vectors from the text hash: no model, instant."""

    model_id = "hash-test"
    dim = 16

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([synthetic_vector(t, self.dim) for t in texts]) if texts else np.zeros((0, 16), np.float32)


def trimmed(stacks: list[Haystack], questions: int, turns: int) -> list[Haystack]:
    """The first turns of each haystack plus every turn of a gold session (so hits are possible)."""
    out = []
    for h in stacks:
        qs = h.questions[:questions]
        gold = {s for q in qs for s in q.gold_sessions}
        keep = [t for i, t in enumerate(h.turns) if i < turns or t.session_id in gold]
        out.append(replace(h, turns=tuple(keep), questions=qs))
    return out


def args_for(tmp_path: Path, k: str) -> argparse.Namespace:
    return argparse.Namespace(modes="bm25,dense,m3", k=k, out=tmp_path / "results", cache=None, threads=None)


def check_run(summary: dict, questions: int, modes: int = 3) -> None:
    log = Path(summary["log"])
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == questions == summary["scope"]["questions"]
    assert set(records[0]["results"]) == {"bm25", "dense", "m3"}
    assert json.loads((log.parent / "summary.json").read_text())["results"]["overall"]["n"] == questions
    assert table_from_log(log).as_dict() == summary["results"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert summary["code"]["commit"] == head  # the figures name the code that produced them


@pytest.fixture
def hash_cache(tmp_path: Path) -> CachingEmbedder:
    return CachingEmbedder(HashEmbedder(), tmp_path / "cache.sqlite")


def test_longmemeval_s_on_two_questions(tmp_path: Path, data: Path, hash_cache: CachingEmbedder) -> None:
    stacks = trimmed(load_longmemeval(data, "s", limit=2), 1, 30)
    summary = run_benchmark("longmemeval", args_for(tmp_path, "1,5"), stacks, "session", {"split": "s"},
                            "smoke", embedder=hash_cache)
    check_run(summary, 2)
    assert summary["results"]["overall"]["m3"]["@5"] > 0


def test_longmemeval_oracle_pooled(tmp_path: Path, data: Path, hash_cache: CachingEmbedder) -> None:
    stacks = trimmed(load_longmemeval(data, "oracle", limit=3), 3, 0)
    assert len(stacks) == 1 and len(stacks[0].questions) == 3
    summary = run_benchmark("longmemeval", args_for(tmp_path, "1,5"), stacks, "session", {"split": "oracle"},
                            "smoke", embedder=hash_cache)
    check_run(summary, 3)


def test_locomo_on_three_questions(tmp_path: Path, data: Path, hash_cache: CachingEmbedder) -> None:
    stacks = trimmed(load_locomo(data)[:1], 3, 20)
    summary = run_benchmark("locomo", args_for(tmp_path, "5,10"), stacks, "turn", {}, "smoke", embedder=hash_cache)
    check_run(summary, 3)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_perf_write_measures_each_level_on_either_store(tmp_path: Path, data: Path, store: str) -> None:
    summary = perf_write.main(["--data", str(data), "--writes", "12", "--writers", "1,4", "--store", store,
                               "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path)])
    assert summary["store"] == store
    assert [row["writes"] for row in summary["levels"]] == [12, 12]


def test_perf_write_runs_each_level_with_the_heap_as_started_then_settled(tmp_path: Path, data: Path) -> None:
    summary = perf_write.main(["--data", str(data), "--writes", "8", "--writers", "1,2", "--heap", "both",
                               "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path)])
    gc.unfreeze()
    assert [(row["writers"], row["heap"]) for row in summary["levels"]] == [
        (1, "as-started"), (1, "settled"), (2, "as-started"), (2, "settled")]
    assert [row["throughput_x"] for row in summary["levels"][::2]] == [1.0, 1.0]


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_backlog_count_times_both_ways_and_finds_the_same_count(tmp_path: Path, data: Path, store: str) -> None:
    rows = backlog_count.main(["--data", str(data), "--size", "40", "--rounds", "1", "--store", store,
                               "--cache", str(tmp_path / "c.sqlite")])
    assert [row["arm"] for row in rows] == ["in indexes", "row by row"]
    assert all(row["same_count"] and row["median_ms"] > 0 for row in rows) and rows[1]["x"] == 1.0


def test_gc_pauses_times_full_collections_as_started_and_settled(tmp_path: Path, data: Path) -> None:
    rows = gc_pauses.main(["--data", str(data), "--size", "40", "--searches", "2", "--collections", "2",
                           "--cache", str(tmp_path / "c.sqlite")])
    assert [row["arm"] for row in rows] == ["as started", "settled"] and rows[0]["median_x"] == 1.0
    # Settled, a full collection walks only what was made since: far fewer objects.
    assert rows[1]["tracked_objects"] < rows[0]["tracked_objects"] // 10


def test_query_model_times_a_query_and_splits_the_models_kernel_time_by_operator(data: Path) -> None:
    [row] = query_model.main(["--data", str(data), "--queries", "3", "--threads", "1"])
    assert row["threads"] == 1 and row["queries"] == 3 and row["p50_ms"] > 0
    assert 0 < row["matmul_ms"] <= row["kernels_ms"] and 0 < row["matmul_share"] <= 1 and "MatMul" in row["top_ops"]


def test_embed_idle_times_each_query_after_every_gap_and_compares_the_medians(data: Path) -> None:
    rows = embed_idle.main(["--data", str(data), "--queries", "3", "--gaps", "0,2"])
    assert [(r["idle_before_ms"], r["queries"]) for r in rows] == [(0.0, 3), (2.0, 3)]
    assert rows[0]["p50_x"] == 1.0 and rows[1]["p50_ms"] > 0


def test_engine_start_times_each_first_command_of_a_new_store_in_its_own_home() -> None:
    rows = engine_start.main(["--rounds", "1"])
    assert [(r["step"], r["version"], r["rounds"]) for r in rows] == [
        (step, "after", 1) for step, _ in engine_start.STEPS]
    assert all(r["median_s"] > 0 and r["x"] == 1.0 for r in rows)


def test_perf_write_compares_a_baseline_checkout_with_this_one_round_by_round(tmp_path: Path, data: Path) -> None:
    root = Path(perf_write.__file__).resolve().parent.parent  # this checkout as its own baseline
    summary = perf_write.main(["--data", str(data), "--writes", "8", "--writers", "1", "--baseline", str(root),
                               "--rounds", "2", "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path)])
    assert [(row["round"], row["version"], row["writes"]) for row in summary["levels"]] == [
        (1, "before", 8), (1, "after", 8), (2, "before", 8), (2, "after", 8)]
    assert [row["throughput_x"] for row in summary["levels"][::2]] == [1.0, 1.0]


def test_write_cpu_reports_the_cpu_of_the_caller_and_of_the_writer_per_write(tmp_path: Path, data: Path) -> None:
    [row] = write_cpu.main(["--data", str(data), "--writes", "6", "--cache", str(tmp_path / "c.sqlite")])
    assert row["writes"] == 6
    assert row["caller_cpu_p50_ms"] > 0 and row["writer_cpu_p50_ms"] > 0


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_perf_vector_store_times_the_writers_vectors_alone_and_in_groups_on_either_store(
        tmp_path: Path, store: str) -> None:
    summary = perf_vector_store.main(["--store", store, "--memories", "40", "--dim", "16", "--single", "3",
                                      "--groups", "1", "--out", str(tmp_path)])
    [row] = summary["levels"]
    assert (row["store"], row["memories"]) == (store, 40)
    assert row["ms_per_vector_alone"] > 0 and row["ms_per_vector_in_64"] > 0


def test_pg_nearest_ab_times_one_statement_against_a_query_per_vector() -> None:
    row = pg_nearest_ab.main(["--memories", "40", "--unit", "4", "--dim", "16", "--repeats", "1"])
    assert row["one_statement_ms"] > 0 and row["query_per_vector_ms"] > 0


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_perf_search_grows_one_store_of_either_kind(tmp_path: Path, data: Path, store: str) -> None:
    summary = perf_search.main(["--data", str(data), "--sizes", "30,60", "--queries", "4", "--source", "oracle",
                                "--store", store, "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path)])
    assert summary["store"] == store
    assert [row["memories"] for row in summary["sizes"]] == [30, 60]
    assert summary["vectors"]["synthetic"] >= 60
    assert summary["settled"] and [row["entity_backlog"] for row in summary["sizes"]] == [0, 0]


def test_perf_search_stores_runs_on_both_stores(tmp_path: Path, data: Path) -> None:
    summary = perf_search_stores.main(["--data", str(data), "--size", "40", "--queries", "3", "--source", "oracle",
                                       "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path)])
    assert [row["store"] for row in summary["stores"]] == ["sqlite", "postgres"]
    assert all(row["memories"] == 40 and row["m3_p50"] > 0 and row["m3_filtered_p95"] > 0
               for row in summary["stores"])


@pytest.mark.skipif(not (SHARED / "longmemeval").is_dir() or not (SHARED / "locomo").is_dir(),
                    reason=f"the shared dev split is not at {SHARED} (it is never part of the project)")
def test_the_shared_dev_data_loads_in_full() -> None:
    assert len(load_longmemeval(SHARED, "s")) == 400
    assert len(load_longmemeval(SHARED, "oracle")[0].questions) == 402
    assert len(load_locomo(SHARED)) == 7


def test_perf_search_ab_fills_a_kept_store_then_searches_it(tmp_path: Path, data: Path) -> None:
    common = ["--data", str(data), "--store", str(tmp_path / "store"), "--size", "40", "--queries", "3",
              "--source", "oracle", "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path)]
    assert perf_search_ab.main(["fill", *common])["row"]["memories"] == 40
    row = perf_search_ab.main(["search", *common])["row"]
    assert row["m3_p50"] > 0 and row["m3_filtered_p95"] > 0


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_loop_decay_sweeps_the_store_in_ticks_of_its_budget_and_archives_the_faint_share(
        tmp_path: Path, store: str) -> None:
    summary = loop_decay.run(["--memories", "60", "--budget", "25", "--queries", "4", "--store", store,
                              "--archived-share", "0.5", "--cache", str(tmp_path / "c.sqlite")])
    quiet, archiving = summary["sweep_nothing_to_archive"], summary["sweep_archiving"]
    assert (quiet["ticks"], quiet["seen"], quiet["archived"]) == (3, 60, 0)
    assert archiving["seen"] == 60 and 0 < archiving["archived"] < 60
    assert summary["search_ms_after_archiving"]["cpu_ms_mean"] >= 0


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_entity_index_indexes_the_whole_backlog_it_wrote_on_either_store(tmp_path: Path, data: Path,
                                                                          store: str) -> None:
    [row] = entity_index.main(["--data", str(data), "--memories", "40", "--store", store,
                               "--cache", str(tmp_path / "c.sqlite")])
    assert (row["store"], row["memories"]) == (store, 40)
    assert row["mentions"] > 0 and row["entities"] > 0 and row["writer_cpu_s"] > 0


def test_write_cpu_and_entity_index_compare_a_baseline_checkout_with_this_one(tmp_path: Path, data: Path) -> None:
    root = Path(write_cpu.__file__).resolve().parent.parent  # this checkout as its own baseline
    common = ["--data", str(data), "--cache", str(tmp_path / "c.sqlite"), "--baseline", str(root)]
    cpu = write_cpu.main([*common, "--writes", "4"])
    assert [(row["version"], row["writes"]) for row in cpu] == [("before", 4), ("after", 4)]
    assert cpu[0]["cpu_p50_x"] == 1.0 and cpu[1]["cpu_p50_x"] > 0
    entities = entity_index.main([*common, "--memories", "20"])
    assert [(row["version"], row["memories"]) for row in entities] == [("before", 20), ("after", 20)]
    assert entities[0]["memories_per_s_x"] == 1.0 and entities[1]["writer_cpu_s_x"] > 0


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_keyword_scale_times_the_keyword_leg_and_scores_the_questions_on_either_store(
        tmp_path: Path, data: Path, store: str) -> None:
    [row] = keyword_scale.main(["--data", str(data), "--size", "50", "--queries", "4", "--store", store,
                                "--cache", str(tmp_path / "c.sqlite")])
    assert row["memories"] == 50 and row["keyword_p50"] > 0 and row["search_p50"] > 0 and row["questions"] > 0
    for mode in ("m3", "bm25"):
        rates = [row[f"{mode}_hit@{k}"] for k in (1, 5, 10)]
        assert rates == sorted(rates) and rates[0] >= 0 and rates[-1] <= 1


def test_pg_dense_overlap_times_one_and_two_connections_on_one_postgresql_store(tmp_path: Path, data: Path) -> None:
    rows = pg_dense_overlap.main(["--data", str(data), "--size", "40", "--queries", "4",
                                  "--cache", str(tmp_path / "c.sqlite")])
    assert [row["dense leg"] for row in rows] == ["two connections", "one connection"]
    assert rows[0]["queries"] == rows[1]["queries"] > 0 and all(row["p50_ms"] > 0 for row in rows)
    assert rows[1]["p50_x"] == 1.0


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_query_handover_times_both_arms_on_one_store_and_finds_the_same_answers(
        tmp_path: Path, data: Path, store: str) -> None:
    rows = query_handover.main(["--data", str(data), "--size", "40", "--queries", "4", "--store", store,
                                "--cache", str(tmp_path / "c.sqlite")])
    assert [row["arm"] for row in rows] == ["after", "before"]
    assert rows[0]["queries"] == rows[1]["queries"] > 0 and all(row["p50_ms"] > 0 for row in rows)
    assert rows[1]["p50_x"] == 1.0 and rows[0]["answers_differing"] == 0
    # The arm "before" puts everything back afterwards.
    assert query_handover.query_embedding.HANDOVER_WAIT_S > 0
    assert query_handover.minilm._token_ids is not query_handover._batch_token_ids


@pytest.mark.parametrize(("change", "store"), [("int8-scan", "sqlite"), ("row-vectors", "postgres"),
                                               ("ids-drive", "sqlite"), ("window-drive", "sqlite"),
                                               ("broad-filter", "sqlite"), ("unlisted-counted", "postgres"),
                                               ("lexemes-kept", "postgres"), ("embedding-first", "sqlite"),
                                               ("embedding-first", "postgres"), ("first-proposals", "sqlite"),
                                               ("statements-kept", "sqlite"), ("statements-kept", "postgres"),
                                               ("signals-early", "sqlite"), ("full-statement-kept", "sqlite"),
                                               ("full-statement-kept", "postgres"), ("int8-queries", "sqlite"),
                                               ("rows-with-hits", "sqlite"), ("rows-with-hits", "postgres"),
                                               ("statements-per-filter", "sqlite"),
                                               ("statements-per-filter", "postgres"),
                                               ("matches-counted", "sqlite"), ("proximity", "sqlite")])
def test_search_undo_times_a_change_now_and_undone_on_one_store_and_finds_the_same_answers(
        tmp_path: Path, data: Path, change: str, store: str) -> None:
    if change == "int8-scan" and not native.available():
        pytest.skip("the m3_native extension is not installed")
    rows = search_undo.main(["--data", str(data), "--size", "40", "--queries", "4", "--store", store,
                             "--change", change, "--int8-from-rows", "1", "--cache", str(tmp_path / "c.sqlite"),
                             *(["--type", "conversation"] if change in ("ids-drive", "window-drive", "broad-filter")
                               else []), *(["--sessions"] if change == "unlisted-counted" else [])])
    assert [row["arm"] for row in rows] == ["now", "undone"]
    assert rows[0]["queries"] == rows[1]["queries"] > 0 and all(row["p50_ms"] > 0 for row in rows)
    # The 8-bit query vector and the proximity signal may reorder a few answers; every other change must leave
    # them as they were.
    assert rows[1]["p50_x"] == 1.0 and (rows[0]["answers_differing"] == 0 or change in ("int8-queries", "proximity"))
    # Every arm puts back what it changed.
    assert native.INT8_FROM_ROWS > 1 and SqlLeg.vectors_with_rows and SqliteDialect.by_ids is not Dialect.by_ids
    assert vars(search_statements)["search_clause"] is filters.search_clause
    assert not any("memory_hits" in vars(dialect) for dialect in (sqlite.DIALECT, postgres.DIALECT))
    assert gc.get_freeze_count() == 0  # the heap settled for the run is put back
    assert search_undo.fulltext.ranked_within.__module__ == "m3.store.fulltext"
    assert search_undo.pg_fulltext._count_unlisted.__name__ == "_count_unlisted"
    assert search_undo.pg_fulltext.tsqueries.__module__ == "m3.store.pg_fulltext"
    assert search_undo.MatrixLeg.propose.__qualname__ == "MatrixLeg.propose"
    assert search_undo.CandidateRows.complete.__qualname__ == "CandidateRows.complete"
    assert search_undo.ranking.prepare.__name__ == "prepare"
    assert type(search_undo.id_reads._WHOLE_ROWS) is dict


def test_an_undone_arm_puts_back_a_modules_a_classs_and_an_objects_attributes_as_they_were() -> None:
    class Owner:
        value = 1

        def method(self) -> int:
            return 2

    thing, own_method = Owner(), Owner.method
    with search_undo._replaced(Owner, value=10), search_undo._replaced(thing, method=lambda: 20), \
            search_undo._replaced(native, INT8_FROM_ROWS=-1):
        assert (Owner.value, thing.method(), native.INT8_FROM_ROWS) == (10, 20, -1)
    # The object held no method of its own: it is removed, and the class's shows through again.
    assert Owner.value == 1 and "method" not in vars(thing) and Owner.method is own_method and thing.method() == 2
    assert native.INT8_FROM_ROWS > 1


def test_pg_buffers_restarts_the_server_with_each_setting_and_leaves_it_on_m3s(tmp_path: Path, data: Path) -> None:
    rows = pg_buffers.main(["--data", str(data), "--size", "40", "--queries", "3", "--rounds", "1",
                            "--cache", str(tmp_path / "c.sqlite")])
    assert [(row["arm"], row["round"]) for row in rows] == [("postgres default", 1), ("m3 default", 1)]
    assert rows[0]["shared_buffers"] == "128MB" and all(row["p50_ms"] > 0 for row in rows)
    assert rows[0]["p50_x"] == 1.0


def test_successor_index_times_both_lookups_without_and_with_the_index(
        tmp_path: Path, data: Path) -> None:
    rows = successor_index.main(["--data", str(data), "--size", "40", "--lookups", "5", "--rounds", "1",
                                 "--cache", str(tmp_path / "c.sqlite")])
    assert [(row["arm"], row["statement"]) for row in rows] == [
        ("no index", "version_chain"), ("no index", "update_relink"),
        ("index", "version_chain"), ("index", "update_relink")]
    assert all(row["p50_ms"] > 0 for row in rows) and rows[0]["p50_x"] == rows[1]["p50_x"] == 1.0


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_row_reads_times_a_baseline_checkout_and_this_one_on_one_store(tmp_path: Path, data: Path, store: str) -> None:
    root = Path(row_reads.__file__).resolve().parent.parent  # this checkout as its own baseline
    rows = row_reads.main(["--data", str(data), "--size", "40", "--store", store, "--rounds", "2", "--calls", "5",
                           "--cache", str(tmp_path / "c.sqlite"), "--baseline", str(root), "--type", "conversation"])
    assert [row["version"] for row in rows] == ["before", "after"]
    assert rows[0]["x"] == [1.0, 1.0] and len(rows[1]["rounds_median_ms"]) == 2
    assert all(row["same_rows"] for row in rows)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_tool_reads_times_a_baseline_checkout_and_this_one_on_one_store(tmp_path: Path, data: Path, store: str
                                                                        ) -> None:
    root = Path(tool_reads.__file__).resolve().parent.parent  # this checkout as its own baseline
    rows = tool_reads.main(["--data", str(data), "--size", "40", "--store", store, "--rounds", "2", "--calls", "1",
                              "--cache", str(tmp_path / "c.sqlite"), "--baseline", str(root)])
    assert [(row["version"], row["read"]) for row in rows] == [
        (version, read) for version in ("before", "after")
        for read in ("entity_search", "entity_list", "entity_summary", "memory_stats")]
    assert all(row["x"][0] == 1.0 for row in rows[:4]) and all(row["same_answers"] for row in rows)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_files_reindex_times_both_calls_with_and_without_the_lookup_indexes(tmp_path: Path, data: Path, store: str
                                                                            ) -> None:
    rows = files_reindex.main(["--data", str(data), "--files", "8", "--store", store,
                               "--cache", str(tmp_path / "c.sqlite")])
    assert [row["arm"] for row in rows] == ["with", "without"] and rows[0]["reindex_x"] == 1.0
    for row in rows:
        assert row["chunks"] >= 8 and row["retired"] == row["chunks"] and row["rewritten"] >= row["chunks"]
        assert row["first_index_s"] > 0 and row["reindex_s"] > 0


def test_files_reindex_times_a_baseline_checkout_and_this_one_in_turn(tmp_path: Path, data: Path) -> None:
    root = Path(files_reindex.__file__).resolve().parent.parent  # this checkout as its own baseline
    rows = files_reindex.main(["--data", str(data), "--files", "4", "--cache", str(tmp_path / "c.sqlite"),
                               "--baseline", str(root), "--rounds", "1"])
    assert [row["version"] for row in rows] == ["baseline", "this"] and rows[0]["reindex_x"] == 1.0
    assert rows[0]["chunks"] == rows[1]["chunks"] >= 4 and all(row["reindex_s"] > 0 for row in rows)


def test_keyword_scale_measures_a_baseline_checkout_and_this_one_on_the_same_store(tmp_path: Path, data: Path) -> None:
    root = Path(keyword_scale.__file__).resolve().parent.parent  # this checkout as its own baseline
    rows = keyword_scale.main(["--data", str(data), "--size", "40", "--queries", "3", "--store", "sqlite",
                               "--cache", str(tmp_path / "c.sqlite"), "--baseline", str(root)])
    assert [(row["version"], row["memories"]) for row in rows] == [("before", 40), ("after", 40)]
    assert rows[0]["questions"] == rows[1]["questions"] > 0 and rows[0]["keyword_p50_x"] == 1.0
    # The same code on the same store finds the same things.
    assert all(rows[0][key] == rows[1][key] for key in rows[0] if "hit@" in key)
