"""`m3 embedder reembed` and `m3 embedder status` from the command line, through the shared embed server."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading

import pytest
from sqlalchemy import func, select

from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.minilm import MODEL_ID, MiniLMEmbedder
from m3.protocols.messages.memory import NewMemory, WriteMemories
from m3.store.schema import memory_embeddings as e
from tests.actors.conftest import WAIT_S
from tests.embedserver import M3, running_server, server_env
from tests.stored import fresh

NEW_MODEL = f"{MODEL_ID}@128"
CLI_TIMEOUT_S = 300


def seed(config: Config, embedder: MiniLMEmbedder, n: int, *, embed: bool) -> None:
    """``n`` distinct event memories, with vectors of the default model when ``embed``."""
    system = ActorSystem(config, embedder).start()
    try:
        for start in range(0, n, 200):
            # Owned by the CLI's agent (identity.agent_id), which searches them below.
            memories = tuple(NewMemory(type="event", content=f"Log line {i}: the {i % 7}th sensor reported "
                                       f"{i * 37 % 1000} units at station {i % 13}.", agent_id="local")
                             for i in range(start, min(n, start + 200)))
            system.writer.ask(WriteMemories(memories=memories, actor="seed"), WAIT_S)
        if embed:
            system.wait_embedded(WAIT_S * 4)
    finally:
        system.stop(drain_embeddings=embed)


def count_vectors(url: str, model: str) -> int:
    with fresh(url) as conn:
        return int(conn.execute(select(func.count()).select_from(e).where(e.c.model == model)).scalar_one())


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([M3, *args], env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)


@pytest.mark.store_only("sqlite", reason="the shared server and one-shot processes are plumbing; re-embedding's store "
                        "work runs on both stores in tests/actors/test_reembed.py and the kill test below")
def test_reembed_through_the_shared_server_switches_search_to_the_new_model(
        env: dict[str, str], config: Config, store_url: str, embedder: MiniLMEmbedder) -> None:
    seed(config, embedder, 40, embed=True)
    with running_server(server_env(env, embed__model=NEW_MODEL)) as server:
        # Embedded mode: one-shot commands with actors of their own (an engine would start re-embedding at once).
        client = {**server_env(env, embed__backend="http", embed__url=server.url, embed__model=NEW_MODEL),
                  "M3_ENGINE_MODE": "embedded"}
        before = json.loads(run(client, "embedder", "status").stdout)
        # A one-shot command does not start the re-embedding: status leaves it for reembed (or a server).
        assert (before["model"], before["active_model"], before["pending"]) == (NEW_MODEL, MODEL_ID, 40)
        assert before["reembedding"] is True
        done = run(client, "embedder", "reembed")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert "re-embedding for" in done.stderr and "40/40" in done.stderr
        after = json.loads(run(client, "embedder", "status").stdout)
        found = run(client, "memory", "search", "--query", "what did station 3 report", "--k", "3")
        clients = server.stats()["clients"]
    assert summary["switched"] is True
    assert (summary["previous_model"], summary["active_model"], summary["embedded"]) == (MODEL_ID, NEW_MODEL, 40)
    assert (after["active_model"], after["pending"], after["reembedding"]) == (NEW_MODEL, 0, False)
    assert after["vectors_by_model"] == {MODEL_ID: 40, NEW_MODEL: 40}
    assert found.returncode == 0 and json.loads(found.stdout)["count"] == 3
    # The re-embedding went through the server as background work; the search's query as interactive work.
    assert sum(c["background"] for c in clients.values()) >= 1
    assert sum(c["interactive"] for c in clients.values()) >= 1
    assert count_vectors(store_url, NEW_MODEL) == 40


@pytest.mark.slow
def test_reembed_killed_mid_way_continues_where_it_stopped(env: dict[str, str], config: Config, store_url: str,
                                                          embedder: MiniLMEmbedder) -> None:
    total = 240
    seed(config, embedder, total, embed=False)
    process = subprocess.Popen([M3, "embedder", "reembed"], env=server_env(env, embed__max_batch="8"), text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    progressed = threading.Event()

    def watch() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            match = re.search(r"(\d+)/(\d+) memories", line)
            if match and 0 < int(match[1]) < int(match[2]):
                progressed.set()
        progressed.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        assert progressed.wait(CLI_TIMEOUT_S)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        watcher.join(timeout=30)
        assert process.stderr is not None
        process.stderr.close()
    done_before = count_vectors(store_url, MODEL_ID)
    assert 0 < done_before < total
    done = run(server_env(env), "embedder", "reembed")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["pending"] == 0 and summary["embedded"] == total - done_before
    assert count_vectors(store_url, MODEL_ID) == total


def test_config_set_embed_url_and_model_are_written_and_the_key_is_never_shown(env: dict[str, str]) -> None:
    for key, value in (("embed.url", "http://127.0.0.1:8082/v1"), ("embed.model", NEW_MODEL),
                       ("embed.key", "k3y-value")):
        done = run(env, "config", "set", key, value)
        assert done.returncode == 0, done.stderr
        assert "k3y-value" not in done.stdout
    shown = run(env, "config", "show")
    settings = json.loads(shown.stdout)["settings"]
    assert (settings["embed.url"], settings["embed.model"]) == ("http://127.0.0.1:8082/v1", NEW_MODEL)
    assert settings["embed.key"] == "<set, hidden>" and "k3y-value" not in shown.stdout


@pytest.mark.store_only("sqlite", reason="the configuration is refused before any store is opened")
def test_an_unknown_backend_or_a_model_the_backend_cannot_compute_is_a_config_error(env: dict[str, str]) -> None:
    for settings in ({"embed__backend": "word2vec"}, {"embed__model": "bge-m3"},
                     {"embed__backend": "http", "embed__model": "x"}):
        done = run(server_env(env, **settings), "embedder", "status")
        assert done.returncode == 1
        assert json.loads(done.stderr.strip().splitlines()[-1])["error"]["code"] == "config_error", done.stderr
