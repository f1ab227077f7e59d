"""``m3 serve`` protects itself: bounded bodies, a deadline for a body, idle connections closed, a clear
error on a port in use.

The client here is a raw TCP stream, so the test sees exactly what the
server sends and when it closes the connection. The server runs with small
limits (2 KiB bodies, 1 s to send one, 1 s keep-alive) from the environment.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from m3.actors.system import ActorSystem
from m3.config import load_config
from m3.embed.minilm import MiniLMEmbedder
from m3.gateway.registry import default_registry
from m3.gateway.service import Service
from tests.gateway.test_mcp_http import serving, token_for

LIMITS = {"M3_SERVE_MAX_BODY_BYTES": "2048", "M3_SERVE_BODY_TIMEOUT_S": "1", "M3_SERVE_KEEP_ALIVE_S": "1"}
#: How long past a limit the server may take to act on it on a busy machine.
GRACE_S = 5.0


@pytest.fixture
def limited(env: dict[str, str], embedder: MiniLMEmbedder) -> Iterator[Service]:
    config = load_config({**env, **LIMITS})
    system = ActorSystem(config, embedder).start()
    try:
        yield Service(config, system, default_registry())
    finally:
        system.stop()


def host_port(url: str) -> tuple[str, int]:
    netloc = url.split("://", 1)[1].split("/", 1)[0]
    host, port = netloc.rsplit(":", 1)
    return host, int(port)


def request_head(token: str, path: str = "/v1/tools/memory_search", **headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: m3", f"Authorization: Bearer {token}", "Content-Type: application/json",
             *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def until_closed(stream: trio.SocketStream, within: float) -> bytes:
    """Everything the server sends until it closes the connection, which must happen ``within`` seconds."""
    received = b""
    with trio.fail_after(within):
        while chunk := await stream.receive_some(65536):
            received += chunk
    return received


def parse(raw: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
    return int(status_line.split()[1]), headers, json.loads(body) if body else None


@pytest.mark.anyio
async def test_a_client_trickling_its_body_is_answered_408_and_disconnected_within_the_timeout(
        limited: Service) -> None:
    token, _ = token_for(limited, "agent-a")
    async with serving(limited) as url:
        stream = await trio.open_tcp_stream(*host_port(url))
        await stream.send_all(request_head(token, Content_Length="1000"))
        started = trio.current_time()
        async with trio.open_nursery() as nursery:

            async def trickle() -> None:
                """A byte every 100 ms: each arrives well within any idle timeout, the whole never does."""
                try:
                    for _ in range(1000):
                        await stream.send_all(b" ")
                        await trio.sleep(0.1)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return

            nursery.start_soon(trickle)
            raw = await until_closed(stream, within=1 + GRACE_S)
            nursery.cancel_scope.cancel()
        elapsed = trio.current_time() - started
        await stream.aclose()
    status, headers, body = parse(raw)
    assert (status, body["error"]["code"], headers["connection"]) == (408, "request_timeout", "close")
    assert 0.9 <= elapsed <= 1 + GRACE_S


@pytest.mark.anyio
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_a_body_over_the_limit_is_413_and_the_server_then_closes_the_connection(
        limited: Service, framing: str) -> None:
    token, _ = token_for(limited, "agent-a")
    body = json.dumps({"query": "x" * 4000}).encode()
    if framing == "chunked":
        head = request_head(token, Transfer_Encoding="chunked")
        payload = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    else:
        head, payload = request_head(token, Content_Length=str(len(body))), body
    async with serving(limited) as url:
        stream = await trio.open_tcp_stream(*host_port(url))
        await stream.send_all(head + payload)
        raw = await until_closed(stream, within=GRACE_S)
        await stream.aclose()
    status, headers, answer = parse(raw)
    assert (status, answer["error"]["code"], headers["connection"]) == (413, "request_too_large", "close")
    assert answer["error"]["details"] == {"max_bytes": 2048}


@pytest.mark.anyio
async def test_an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout(limited: Service) -> None:
    token, _ = token_for(limited, "agent-a")
    body = b'{"query": "anything"}'
    async with serving(limited) as url:
        stream = await trio.open_tcp_stream(*host_port(url))
        await stream.send_all(request_head(token, Content_Length=str(len(body))) + body)
        started = trio.current_time()
        raw = await until_closed(stream, within=1 + GRACE_S)  # the answer, then the close once idle
        elapsed = trio.current_time() - started
        await stream.aclose()
    status, headers, _answer = parse(raw)
    assert status == 200 and headers.get("connection") != "close"  # kept alive, until idle for too long
    assert 0.9 <= elapsed <= 1 + GRACE_S


def test_m3_serve_on_a_port_in_use_prints_address_in_use_as_json_and_exits_1(
        m3_executable: str, child_env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([m3_executable, "serve", "--port", str(port)], env=child_env, capture_output=True,
                              text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    error = json.loads(done.stderr)["error"]
    assert error["code"] == "address_in_use"
    assert error["details"] == {"host": "127.0.0.1", "port": port}
