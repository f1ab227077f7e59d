"""`m3 embedder serve` speaks the OpenAI embeddings API: the official `openai` client against the real server."""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import numpy as np
import openai
import pytest

from m3.embed.minilm import MiniLMEmbedder
from tests.embedserver import M3, EmbedServer, free_port, running_server

MODEL = "all-MiniLM-L6-v2-int8"
TEXTS = ["The deploy key rotates every Monday.", "Coffee beans live in the blue tin.", "Bicycles need oil."]


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
    env.update({"M3_HOME": str(home), **extra})
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbedServer]:
    with running_server(clean_env(tmp_path_factory.mktemp("server-home"))) as started:
        yield started


@pytest.fixture
def client(server: EmbedServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0) as c:
        yield c


def test_the_openai_client_gets_vectors_of_the_configured_dim_equal_to_the_in_process_model(
        client: openai.OpenAI, embedder: MiniLMEmbedder) -> None:
    response = client.embeddings.create(model=MODEL, input=TEXTS)
    assert response.model == MODEL
    assert [item.index for item in response.data] == [0, 1, 2]
    served = np.array([item.embedding for item in response.data], dtype=np.float32)
    assert served.shape == (3, 384)
    np.testing.assert_allclose(served, embedder.embed(TEXTS), atol=1e-6)
    assert response.usage.total_tokens > 0


def test_a_single_string_input_and_both_encodings_give_the_same_vector(client: openai.OpenAI, server: EmbedServer,
                                                                        embedder: MiniLMEmbedder) -> None:
    as_float = client.embeddings.create(model=MODEL, input=TEXTS[0], encoding_format="float").data[0].embedding
    raw = httpx.post(f"{server.url}/embeddings", json={"model": MODEL, "input": TEXTS[0],
                                                         "encoding_format": "base64"}).json()
    as_base64 = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(np.array(as_float, dtype=np.float32), as_base64)
    np.testing.assert_allclose(as_base64, embedder.embed(TEXTS[:1])[0], atol=1e-6)


def test_health_reports_the_model_and_dim_and_models_lists_it(client: openai.OpenAI, server: EmbedServer) -> None:
    health = httpx.get(f"{server.root}/health").json()
    assert (health["status"], health["model"], health["dim"]) == ("ok", MODEL, 384)
    assert [m.id for m in client.models.list()] == [MODEL]


def test_another_model_name_is_refused_with_404_so_no_vector_is_stored_under_a_wrong_name(
        client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError, match="serves 'all-MiniLM-L6-v2-int8'"):
        client.embeddings.create(model="text-embedding-3-small", input="hello")


@pytest.mark.parametrize(("body", "param"), [
    ({"model": MODEL, "input": [[101, 2023]]}, "input"),
    ({"model": MODEL, "input": []}, "input"),
    ({"model": MODEL}, "input"),
    ({"input": "x"}, "model"),
    ({"model": MODEL, "input": "x", "dimensions": 256}, "dimensions"),
    ({"model": MODEL, "input": "x", "encoding_format": "int8"}, "encoding_format"),
])
def test_bad_requests_get_an_openai_shaped_400_naming_the_parameter(server: EmbedServer, body: dict[str, object],
                                                                   param: str) -> None:
    response = httpx.post(f"{server.url}/embeddings", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert error["message"]


def test_requests_are_counted_per_client_and_by_priority(server: EmbedServer) -> None:
    for name, priority in (("counter-a", "interactive"), ("counter-b", "background"), ("counter-b", None)):
        headers = {"X-M3-Client": name} | ({"X-M3-Priority": priority} if priority else {})
        assert httpx.post(f"{server.url}/embeddings", json={"model": MODEL, "input": TEXTS},
                          headers=headers).status_code == 200
    clients = server.stats()["clients"]
    assert (clients["counter-a"]["requests"], clients["counter-a"]["interactive"]) == (1, 1)
    # Without a header, three texts count as interactive (a small request).
    assert (clients["counter-b"]["requests"], clients["counter-b"]["background"],
            clients["counter-b"]["interactive"], clients["counter-b"]["texts"]) == (2, 1, 1, 6)


def test_with_a_key_set_requests_without_it_are_refused_and_health_stays_open(tmp_path: Path) -> None:
    with running_server(clean_env(tmp_path, M3_EMBED_KEY="s3cret")) as keyed:
        with openai.OpenAI(base_url=keyed.url, api_key="wrong", max_retries=0) as wrong, \
                pytest.raises(openai.AuthenticationError):
            wrong.embeddings.create(model=MODEL, input="x")
        with openai.OpenAI(base_url=keyed.url, api_key="s3cret", max_retries=0) as right:
            assert len(right.embeddings.create(model=MODEL, input="x").data[0].embedding) == 384
        assert httpx.get(f"{keyed.root}/health").status_code == 200
        assert "s3cret" not in "".join(keyed.stderr)


def test_serve_on_a_port_in_use_fails_with_a_coded_error(tmp_path: Path, server: EmbedServer) -> None:
    done = subprocess.run([M3, "embedder", "serve", "--port", str(server.port)], env=clean_env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    assert '"code": "unavailable"' in done.stderr and "--port" in done.stderr


def test_serve_refuses_a_configuration_without_an_in_process_model(tmp_path: Path) -> None:
    env = clean_env(tmp_path, M3_EMBED_BACKEND="http", M3_EMBED_URL=f"http://127.0.0.1:{free_port()}/v1",
                    M3_EMBED_MODEL="x")
    done = subprocess.run([M3, "embedder", "serve", "--port", str(free_port())], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 1
    assert '"code": "config_error"' in done.stderr
