"""The front-ends' HTTP client of the engine: kept-alive connections of a long-lived front-end."""

from __future__ import annotations

import time

import pytest

from m3.config import load_config
from m3.gateway.engine import client
from m3.gateway.engine.calls import caller_headers
from m3.gateway.engine.paths import engine_paths
from tests.gateway.outcomes import Run


def _write(connections: client.Connections, headers: dict[str, str], content: str) -> str:
    status, body = connections.call_tool("memory_write", {"content": content}, headers)
    assert status == 200, body
    return str(body["id"])


def test_calls_share_one_kept_alive_connection_and_a_replaced_engine_gets_a_new_one(
        m3: Run, env: dict[str, str]) -> None:
    config = load_config(env)
    headers = caller_headers(config)
    assert m3("engine", "start").status == 0
    connections = client.Connections(engine_paths(config).sock)
    try:
        for i in range(3):
            _write(connections, headers, f"kept-alive note {i}")
        assert connections.opened == 1
        began = time.monotonic()
        assert m3("engine", "stop").status == 0
        # An idle kept-alive connection does not hold the engine's shutdown up (it would until the engine's 75 s
        # keep-alive timeout; the bound is generous for a busy machine).
        assert time.monotonic() - began < 30.0
        assert m3("engine", "start").status == 0
        # The stopped engine closed the idle connection: the call goes out on a new one, once.
        _write(connections, headers, "written to the new engine")
        assert connections.opened == 2
    finally:
        connections.close()
        m3("engine", "stop")


def test_a_connection_idle_longer_than_the_keep_window_is_not_reused(m3: Run, env: dict[str, str]) -> None:
    config = load_config(env)
    assert m3("engine", "start").status == 0
    connections = client.Connections(engine_paths(config).sock, keep_idle_s=0.0)
    try:
        for i in range(2):
            _write(connections, caller_headers(config), f"short-lived note {i}")
        assert connections.opened == 2
    finally:
        connections.close()
        m3("engine", "stop")


def test_without_an_engine_a_call_is_not_sent(env: dict[str, str]) -> None:
    config = load_config(env)
    connections = client.Connections(engine_paths(config).sock)
    with pytest.raises(client.EngineDown):
        connections.call_tool("memory_write", {"content": "nobody listens"}, caller_headers(config))
    assert connections.opened == 0
