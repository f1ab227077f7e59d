"""The chat client against the stand-in server: the real wire protocol over HTTP, scripted answers."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from m3.cognition.llm import MAX_RETRY_AFTER_S, OpenAIChatModel, chat_model_from_config, chat_url, parse_content
from m3.config import load_config
from m3.errors import ConfigError, LlmError
from tests.llmserver import HOLD, ChatServer, Status


class Waits:
    """The client's injected sleep: records every backoff instead of waiting it."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


_OPEN: list[OpenAIChatModel] = []


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(key="sk-test") as running:
        yield running
    while _OPEN:
        _OPEN.pop().close()


def client(server: ChatServer, waits: Waits | None = None, **kwargs: object) -> OpenAIChatModel:
    """A client of ``server`` (closed with the server's fixture)."""
    options: dict[str, object] = {"key": "sk-test", "timeout_s": 5.0, "retries": 2, **kwargs}
    made = OpenAIChatModel(server.url, server.model, sleep=waits or Waits(), **options)  # type: ignore[arg-type]
    _OPEN.append(made)
    return made


def test_a_json_mode_answer_is_parsed_and_the_request_has_the_chat_completions_shape(server: ChatServer) -> None:
    server.add(json.dumps({"observations": [{"item": 1, "kind": "fact", "text": "I live in Oslo"}]}))
    answer = client(server).complete_json("sys", "Items: [1] I live in Oslo", schema_hint="{...}")
    assert answer == {"observations": [{"item": 1, "kind": "fact", "text": "I live in Oslo"}]}
    [body] = server.requests
    assert body["model"] == server.model and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"].endswith("{...}") and body["messages"][1]["content"].endswith("Oslo")


def test_the_key_is_sent_as_a_bearer_token(server: ChatServer) -> None:
    server.add("{}")
    client(server).complete_json("s", "u")
    assert server.headers[0]["authorization"] == "Bearer sk-test"


def test_a_fenced_json_block_is_unwrapped(server: ChatServer) -> None:
    server.add('```json\n{"observations": []}\n```')
    assert client(server).complete_json("s", "u") == {"observations": []}


def test_a_429_is_retried_after_the_servers_retry_after_within_the_cap(server: ChatServer) -> None:
    waits = Waits()
    server.add(Status(429, "slow down", retry_after=3), Status(429, retry_after=600), '{"ok": true}')
    assert client(server, waits).complete_json("s", "u") == {"ok": True}
    assert waits.delays == [3.0, MAX_RETRY_AFTER_S]
    assert len(server.requests) == 3


def test_500s_that_outlast_the_retries_are_an_llm_error_with_a_hint(server: ChatServer) -> None:
    waits = Waits()
    server.add(Status(500), Status(502), Status(503), '{"never": "reached"}')
    with pytest.raises(LlmError) as caught:
        client(server, waits, retries=2).complete_json("s", "u")
    assert caught.value.code == "llm_error" and caught.value.details["status"] == 503
    assert "llm.url" in caught.value.hint
    assert len(server.requests) == 3 and waits.delays == [0.5, 1.0]  # exponential backoff between them


def test_a_401_is_not_retried_and_its_hint_names_the_key(server: ChatServer) -> None:
    waits = Waits()
    with pytest.raises(LlmError) as caught:
        client(server, waits, key="wrong").complete_json("s", "u")
    assert caught.value.details["status"] == 401 and "llm.key" in caught.value.hint
    assert "wrong" not in caught.value.message + caught.value.hint
    assert len(server.requests) == 1 and waits.delays == []


def test_an_answer_held_past_the_timeout_is_an_llm_error(server: ChatServer) -> None:
    server.add(HOLD)
    try:
        with pytest.raises(LlmError) as caught:
            client(server, timeout_s=0.3, retries=0).complete_json("s", "u")
    finally:
        server.release()
    assert caught.value.details.get("timeout") is True


def test_content_that_is_not_json_is_an_llm_error(server: ChatServer) -> None:
    server.add("Sure! Here are the observations: none.")
    with pytest.raises(LlmError, match="not JSON"):
        client(server).complete_json("s", "u")


def test_an_unreachable_endpoint_is_an_llm_error_after_its_retries() -> None:
    with ChatServer() as gone:
        url = gone.url
    waits = Waits()
    with OpenAIChatModel(url, "m", timeout_s=2.0, retries=1, sleep=waits) as model, \
            pytest.raises(LlmError, match="unreachable"):
        model.complete_json("s", "u")
    assert waits.delays == [0.5]


def test_the_stand_in_lists_its_model_like_the_openai_api(server: ChatServer) -> None:
    import httpx2 as httpx

    listed = httpx.get(server.url + "/models", timeout=5).json()
    assert listed["object"] == "list" and listed["data"][0]["id"] == server.model


def test_the_factory_gives_no_model_without_a_url_and_a_client_with_one() -> None:
    assert chat_model_from_config(load_config({"M3_HOME": "/nonexistent-m3-home"})) is None
    config = load_config({"M3_HOME": "/nonexistent-m3-home", "M3_LLM_URL": "http://127.0.0.1:9/v1/",
                          "M3_LLM_MODEL": "llama3"})
    made = chat_model_from_config(config)
    assert made is not None and made.url == "http://127.0.0.1:9/v1/chat/completions" and made.model == "llama3"
    made.close()
    with pytest.raises(ConfigError):
        chat_model_from_config(load_config({"M3_HOME": "/nonexistent-m3-home", "M3_LLM_URL": "http://h/v1"}))


def test_urls_and_contents_are_read_leniently_but_strictly_checked() -> None:
    assert chat_url("http://h:1/v1/chat/completions") == "http://h:1/v1/chat/completions"
    with pytest.raises(ConfigError):
        chat_url("ollama:11434")
    assert parse_content("```\n[1, 2]\n```") == [1, 2]
    with pytest.raises(ValueError):
        parse_content(None)
