"""``m3 serve`` with the engine: a proxy that passes token-bound calls to the engine and nothing else."""

from __future__ import annotations

import json
import signal
import subprocess

import httpx2

from m3.config import load_config
from m3.gateway.engine import client
from m3.gateway.engine.paths import engine_paths
from tests.gateway.outcomes import Run


def test_serve_relays_token_bound_calls_and_ignores_identity_headers_from_the_network(
        m3: Run, m3_executable: str, child_env: dict[str, str], env: dict[str, str]) -> None:
    token = m3("token", "create", "--agent", "remote-1").document()["token"]
    server = subprocess.Popen([m3_executable, "serve", "--port", "0"], env=child_env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        tools = json.loads(server.stdout.readline())["tools_url"]
        base = tools.removesuffix("/v1/tools")
        bearer = {"Authorization": f"Bearer {token}"}
        written = httpx2.post(f"{tools}/memory_write", json={"content": "sent from afar"}, timeout=60,
                              headers={**bearer, client.AGENT_HEADER: "someone-else"})
        assert written.status_code == 200, written.text
        record = httpx2.post(f"{tools}/memory_get", json={"id": written.json()["id"]}, headers=bearer, timeout=60)
        assert record.json()["agent_id"] == "remote-1"  # the token's agent, not the header's
        naming = httpx2.post(f"{tools}/memory_search", json={"query": "afar", "agent_id": "local"}, headers=bearer,
                             timeout=60)
        assert naming.status_code == 403 and naming.json()["error"]["code"] == "forbidden"
        anonymous = httpx2.post(f"{tools}/memory_search", json={"query": "afar"}, timeout=60,
                                headers={client.AGENT_HEADER: "local"})
        assert anonymous.status_code == 401
        wrong = httpx2.post(f"{tools}/memory_search", json={"query": "afar"}, timeout=60,
                            headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert httpx2.post(f"{base}/v1/engine/stop", headers=bearer, timeout=60).status_code == 404
        assert httpx2.get(f"{base}/v1/openapi.json", timeout=60).status_code == 200
        assert client.status(engine_paths(load_config(env)).sock) is not None  # still running
    finally:
        server.send_signal(signal.SIGTERM)
        _out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
