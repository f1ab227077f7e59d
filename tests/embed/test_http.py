"""The HTTP backend and the shared-server fallback, against m3's own embed server (a real process)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from m3.embed.base import Embedder
from m3.embed.http import HttpEmbedder, base_url
from m3.embed.minilm import MiniLMEmbedder
from m3.embed.shared import SharedServerEmbedder
from m3.errors import ConfigError, EmbedderUnavailable
from tests.embedserver import EmbedServer, free_port, running_server, start_server

OPENED: list[HttpEmbedder] = []


def closing(remote: HttpEmbedder) -> HttpEmbedder:
    """Close ``remote`` at the end of the test (an open connection pool is a ResourceWarning, an error here)."""
    OPENED.append(remote)
    return remote


@pytest.fixture(autouse=True)
def close_clients() -> Iterator[None]:
    yield
    while OPENED:
        OPENED.pop().close()

MODEL = "all-MiniLM-L6-v2-int8"
TEXTS = [f"Memory number {i} is about {topic}." for i, topic in
         enumerate(["gardening", "taxes", "the deploy key", "sourdough", "bicycles"] * 9)]


def server_home_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
    env.update({"M3_HOME": str(home), **extra})
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbedServer]:
    with running_server(server_home_env(tmp_path_factory.mktemp("http-home"))) as started:
        yield started


@pytest.mark.parametrize(("given", "base"), [
    ("http://127.0.0.1:8082", "http://127.0.0.1:8082/v1"),
    ("http://127.0.0.1:8082/", "http://127.0.0.1:8082/v1"),
    ("http://127.0.0.1:8082/v1/", "http://127.0.0.1:8082/v1"),
    ("http://127.0.0.1:8082/v1/embeddings", "http://127.0.0.1:8082/v1"),
    ("https://api.example.com/openai/v1", "https://api.example.com/openai/v1"),
])
def test_the_url_is_reduced_to_the_api_base(given: str, base: str) -> None:
    assert base_url(given) == base


@pytest.mark.parametrize("bad", ["", "127.0.0.1:8082", "ftp://host/v1", "http://"])
def test_a_url_that_is_not_http_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError):
        base_url(bad)


def test_vectors_through_http_equal_the_in_process_model_in_input_order_across_requests(
        server: EmbedServer, embedder: MiniLMEmbedder) -> None:
    remote = closing(HttpEmbedder(server.url, MODEL, max_batch=8))  # 45 texts: six requests
    assert not remote.loaded
    vectors = remote.embed(TEXTS)
    assert remote.dim == 384 and remote.loaded
    assert isinstance(remote, Embedder)  # (a runtime protocol check reads dim, which may ask the endpoint)
    assert vectors.dtype == np.float32 and vectors.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(vectors, embedder.embed(TEXTS), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert remote.embed([]).shape == (0, 384)


def test_the_dimension_is_learnt_by_asking_the_endpoint(server: EmbedServer) -> None:
    assert closing(HttpEmbedder(server.url, MODEL)).dim == 384


def test_a_model_the_endpoint_does_not_serve_is_a_clear_error(server: EmbedServer) -> None:
    with pytest.raises(EmbedderUnavailable, match="answered 404") as raised:
        closing(HttpEmbedder(server.url, "nomic-embed-text")).embed(["x"])
    assert "embed.model" in raised.value.hint


def test_an_endpoint_that_is_not_there_fails_at_once_with_a_coded_error() -> None:
    remote = closing(HttpEmbedder(f"http://127.0.0.1:{free_port()}/v1", MODEL, timeout_s=30))
    with pytest.raises(EmbedderUnavailable, match="unreachable") as raised:
        remote.embed(["x"])
    assert raised.value.code == "embedder_unavailable"


def test_a_wrong_key_is_reported_with_a_hint_and_never_shown(tmp_path: Path) -> None:
    with running_server(server_home_env(tmp_path, M3_EMBED_KEY="right-key")) as keyed:
        with pytest.raises(EmbedderUnavailable, match="401") as raised:
            closing(HttpEmbedder(keyed.url, MODEL, key="wrong-key")).embed(["x"])
        assert "embed.key" in raised.value.hint
        assert "wrong-key" not in str(raised.value.to_dict())
        assert closing(HttpEmbedder(keyed.url, MODEL, key="right-key")).embed(["x"]).shape == (1, 384)


def test_a_text_that_is_not_a_list_of_strings_is_refused_before_any_request() -> None:
    remote = closing(HttpEmbedder(f"http://127.0.0.1:{free_port()}/v1", MODEL))
    with pytest.raises(Exception, match="not a single string"):
        remote.embed("hello")  # type: ignore[arg-type]


# ---------------------------------------------------------------- shared server with fallback


def test_the_shared_server_is_used_while_it_answers_then_the_local_model_until_it_is_back(
        tmp_path: Path, embedder: MiniLMEmbedder, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="m3.embed.shared")
    env = server_home_env(tmp_path)
    server = start_server(env)
    port = server.port
    try:
        shared = SharedServerEmbedder(closing(HttpEmbedder(server.url, MODEL, client_id="fallback-test")),
                                      embedder, retry_s=0.0)
        first = shared.embed(TEXTS[:3])
        assert shared.route()["state"] == "server"
        assert server.stats()["clients"]["fallback-test"]["texts"] == 3
        server.kill()
        second = shared.embed(TEXTS[:3])
        route = shared.route()
        assert (route["state"], route["in_process"], route["by_server"]) == ("in_process", 3, 3)
        np.testing.assert_allclose(first, second, atol=1e-6)
        assert shared.embed(TEXTS[3:5]).shape == (2, 384)
        fallback_logs = [r for r in caplog.records if "embedding in process" in r.getMessage()]
        assert len(fallback_logs) == 1  # logged once, not per call
        server = start_server(env, port=port)
        shared.embed(TEXTS[5:6])
        assert shared.route()["state"] == "server"
        assert server.stats()["clients"]["fallback-test"]["texts"] == 1
        assert any("answers again" in r.getMessage() for r in caplog.records)
    finally:
        server.kill()


def test_after_a_failure_the_server_is_left_alone_for_the_retry_period(embedder: MiniLMEmbedder,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="m3.embed.shared")
    shared = SharedServerEmbedder(closing(HttpEmbedder(f"http://127.0.0.1:{free_port()}/v1", MODEL)), embedder,
                                  retry_s=3600.0)
    shared.embed(["one"])
    shared.embed(["two"])
    assert shared.route()["in_process"] == 2
    sibling = shared.with_priority("interactive")
    sibling.embed(["three"])
    assert shared.route()["in_process"] == 3  # siblings share the route: the query did not retry either


def test_the_fallback_must_compute_the_model_the_server_is_asked_for(embedder: MiniLMEmbedder) -> None:
    with pytest.raises(ValueError, match="fallback"):
        SharedServerEmbedder(closing(HttpEmbedder("http://127.0.0.1:1/v1", "bge-m3")), embedder)
