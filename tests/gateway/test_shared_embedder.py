"""m3 processes configured for the shared embed server embed through it, and lose nothing when it dies."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
from sqlalchemy import select

from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.minilm import MODEL_ID, MiniLMEmbedder
from m3.protocols.messages.memory import EmbedderInfo, MemoryFilter, SearchMemories
from m3.store.schema import memory_embeddings as e
from tests.actors.conftest import WAIT_S, write_one
from tests.embedserver import M3, running_server, server_env, start_server
from tests.stored import fresh

CLI_TIMEOUT_S = 120


def m3(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([M3, *args], env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)


def write(env: dict[str, str], content: str) -> tuple[str, str]:
    """Write through a new m3 process; (memory id, its stderr)."""
    done = m3(env, "memory", "write", "--content", content)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"], done.stderr


def stored_vector(url: str, memory_id: str) -> np.ndarray:
    with fresh(url) as conn:
        rows = conn.execute(select(e.c.model, e.c.vector).where(e.c.memory_id == memory_id)).all()
    assert [row[0] for row in rows] == [MODEL_ID], rows
    return np.asarray(rows[0][1], dtype=np.float32)


def test_two_m3_processes_embed_through_the_shared_server_and_its_counters_show_both(
        env: dict[str, str], store_url: str, embedder: MiniLMEmbedder) -> None:
    with running_server(env) as server:
        # Two processes with actors of their own: embedded mode (with the engine there is one client, the engine).
        client_env = {**server_env(env, embed__url=server.url), "M3_ENGINE_MODE": "embedded"}
        first, _ = write(client_env, "The deploy key rotates every Monday.")
        second, _ = write(client_env, "Coffee beans are kept in the blue tin.")
        clients = server.stats()["clients"]
    # Each m3 process names itself agent@host:pid; two processes, two clients.
    assert len([name for name in clients if name.startswith("local@")]) == 2
    assert all(c["texts"] >= 1 and c["errors"] == 0 for c in clients.values())
    np.testing.assert_allclose(stored_vector(store_url, first),
                               embedder.embed(["The deploy key rotates every Monday."])[0], atol=1e-6)
    assert stored_vector(store_url, second).shape == (384,)


def test_after_the_server_is_killed_a_write_is_acknowledged_and_embedded_in_process_with_a_logged_fallback(
        env: dict[str, str], store_url: str) -> None:
    server = start_server(env)
    # The fallback is logged on the stderr of the process that embeds: embedded mode, where that is the command.
    client_env = {**server_env(env, embed__url=server.url), "M3_ENGINE_MODE": "embedded"}
    write(client_env, "A memory embedded by the server.")
    server.kill()
    memory_id, stderr = write(client_env, "Tea is kept in the green tin.")
    assert "embedding in process" in stderr
    assert stored_vector(store_url, memory_id).shape == (384,)
    found = m3(client_env, "memory", "search", "--query", "where do we keep the tea", "--k", "1")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["items"][0]["id"] == memory_id


def test_a_running_m3_keeps_writing_and_embedding_when_the_server_dies_mid_way(
        env: dict[str, str], config: Config, store_url: str, tmp_path: Path) -> None:
    server = start_server(env)
    system = ActorSystem(config.with_overrides(embed__url=server.url, embed__server_retry_s=3600)).start()
    try:
        before = system.writer.ask(write_one("Written while the server answers."), WAIT_S)[0].id
        system.wait_embedded(WAIT_S)
        assert system.embedder.ask(EmbedderInfo(), WAIT_S)["server"]["by_server"] >= 1
        server.kill()
        # Events: near-identical notes would rightly supersede each other.
        after = [system.writer.ask(write_one(f"Written after the server died, number {i}.", type="event"),
                                   WAIT_S)[0].id for i in range(3)]
        system.wait_embedded(WAIT_S)
        route = system.embedder.ask(EmbedderInfo(), WAIT_S)["server"]
        assert route["state"] == "in_process" and route["in_process"] >= 3
        hits = system.searcher.ask(SearchMemories(query="after the server died", k=5, filter=MemoryFilter()),
                                   WAIT_S)
        assert set(after) <= {item.id for item in hits.items}
    finally:
        system.stop()
        server.kill()
    for memory_id in [before, *after]:
        assert stored_vector(store_url, memory_id).shape == (384,)
