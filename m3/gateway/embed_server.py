"""``m3 embedder serve``: one model in memory for every m3 process, over the OpenAI embeddings API.

Routes: ``POST /v1/embeddings``, ``GET /v1/models``, ``GET /health`` (never needs ``embed.key``) and
``GET /stats``; errors in OpenAI's ``{"error": {message, type, param, code}}``. docs/embedder.md describes
them, the client names (``X-M3-Client``) and the priorities (``X-M3-Priority``: interactive work runs first).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import numpy as np
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from m3 import __version__
from m3.actors import bridge
from m3.config import Config
from m3.crypto.provider import same_secret
from m3.embed.base import Embedder
from m3.embed.factory import create_local_embedder
from m3.embed.http import CLIENT_HEADER, PRIORITIES, PRIORITY_HEADER
from m3.embed.scheduler import Scheduler
from m3.errors import Unavailable
from m3.gateway.http_guard import serve_asgi

log = logging.getLogger(__name__)

#: Requests with at most this many texts are interactive unless they say otherwise.
INTERACTIVE_MAX = 4
#: OpenAI's own limit of inputs per request.
MAX_INPUTS = 2048
MAX_BODY_BYTES = 64 << 20


class ApiError(Exception):
    """An OpenAI-shaped error answer."""

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status)


class EmbedApp:
    """The routes over one embedder and its scheduler."""

    def __init__(self, embedder: Embedder, scheduler: Scheduler, *, key: str = "") -> None:
        self.embedder = embedder
        self.scheduler = scheduler
        self._key = key
        self.created = int(time.time())

    def starlette(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/embeddings", self._guard(self.embeddings), methods=["POST"]),
            Route("/v1/models", self._guard(self.models), methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/stats", self._guard(self.stats), methods=["GET"]),
        ])

    def _guard(self, route: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """``route`` behind ``embed.key`` (when set); an :class:`ApiError` becomes its answer."""
        expected = f"Bearer {self._key}".encode()

        async def guarded(request: Request) -> Response:
            try:
                given = request.headers.get("authorization", "").encode()
                if self._key and not same_secret(given, expected):
                    raise ApiError(401, "missing or wrong bearer key", code="invalid_api_key")
                return await route(request)
            except ApiError as exc:
                return exc.response()

        return guarded

    async def health(self, _request: Request) -> Response:
        return JSONResponse({"status": "ok", "model": self.embedder.model_id, "dim": self.embedder.dim,
                             "server": "m3", "version": __version__})

    async def models(self, _request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": self.embedder.model_id, "object": "model", "created": self.created, "owned_by": "m3"}]})

    async def stats(self, _request: Request) -> Response:
        return JSONResponse({"model": self.embedder.model_id, "dim": self.embedder.dim,
                             **self.scheduler.statistics()})

    async def embeddings(self, request: Request) -> Response:
        body = await _json_body(request)
        client = _client(request, body)
        try:
            texts, fmt, priority = self._parse(body, request.headers.get(PRIORITY_HEADER))
        except ApiError:
            self.scheduler.count_error(client)
            raise
        matrix = await _run(self.scheduler, texts, priority, client)
        data = [{"object": "embedding", "index": i, "embedding": _encode(row, fmt)} for i, row in enumerate(matrix)]
        tokens = sum(len(text.split()) for text in texts)  # approximate: words, not model tokens
        return JSONResponse({"object": "list", "data": data, "model": self.embedder.model_id,
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _parse(self, body: dict[str, Any], priority: str | None) -> tuple[list[str], str, str]:
        """The texts, the encoding format and the priority (``priority`` is the header's) of a valid request."""
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise ApiError(400, "'model' is required", param="model")
        if model != self.embedder.model_id:
            raise ApiError(404, f"this server serves {self.embedder.model_id!r}, not {model!r}", param="model",
                           code="model_not_found")
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts:
            raise ApiError(400, "'input' must be a string or a non-empty list of strings", param="input")
        if not all(isinstance(t, str) for t in texts):
            raise ApiError(400, "'input' must hold strings; token arrays are not supported", param="input")
        if len(texts) > MAX_INPUTS:
            raise ApiError(400, f"at most {MAX_INPUTS} inputs per request", param="input")
        fmt = body.get("encoding_format") or "float"
        if fmt not in {"float", "base64"}:
            raise ApiError(400, "'encoding_format' must be 'float' or 'base64'", param="encoding_format")
        dims = body.get("dimensions")
        if dims is not None and dims != self.embedder.dim:
            raise ApiError(400, f"{self.embedder.model_id} has {self.embedder.dim} dimensions only",
                           param="dimensions")
        priority = priority or ("interactive" if len(texts) <= INTERACTIVE_MAX else "background")
        if priority not in PRIORITIES:
            raise ApiError(400, f"{PRIORITY_HEADER} must be one of {list(PRIORITIES)}")
        return texts, fmt, priority


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, f"the request body is over {MAX_BODY_BYTES >> 20} MiB")
    try:
        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


async def _run(scheduler: Scheduler, texts: list[str], priority: str, client: str) -> Any:
    """Queue the texts and wait, without blocking the event loop, for the worker's answer."""
    reply = bridge.TrioReply()
    scheduler.submit(texts, priority, client,
                     lambda matrix, error: reply.set_result(matrix) if error is None else reply.set_exception(error))
    try:
        return await reply.wait(math.inf)
    except Exception as exc:
        scheduler.count_error(client)
        message = getattr(exc, "message", None) or str(exc)
        raise ApiError(503, f"embedding failed: {message}", kind="server_error", code="embedder_unavailable") from None


def _encode(row: Any, fmt: str) -> Any:
    if fmt == "base64":
        return base64.b64encode(np.ascontiguousarray(row, dtype="<f4").tobytes()).decode("ascii")
    return [float(x) if math.isfinite(x) else 0.0 for x in row.tolist()]


def _client(request: Request, body: dict[str, Any]) -> str:
    """Who a request counts under: its ``X-M3-Client`` header, else OpenAI's ``user`` field, else its address."""
    user = body.get("user")
    named = request.headers.get(CLIENT_HEADER) or (user if isinstance(user, str) else "")
    return named or (request.client.host if request.client else "unknown")


def serve(config: Config, host: str = "127.0.0.1", port: int = 8082) -> None:
    """Load the configured in-process model and serve it until SIGINT or SIGTERM.

    Raises:
        ConfigError: the configuration names no in-process model (e.g. backend http).
        EmbedderUnavailable: the model cannot be loaded (nothing is served then).
        Unavailable: the address cannot be bound (port in use).
    """
    # embed.threads as everywhere (default: one less than the CPUs), leaving a core to the m3 processes
    # whose writes and searches run beside the server.
    embedder = create_local_embedder(config)
    embedder.embed(["warm-up"])  # load now: a broken model fails the command, not the first client
    scheduler = Scheduler(embedder, max_batch=config["embed.max_batch"]).start()
    app = EmbedApp(embedder, scheduler, key=config["embed.key"])
    if not config["embed.key"] and host not in {"127.0.0.1", "localhost", "::1"}:
        log.warning("serving on %s without embed.key: anyone who can reach it can use the model", host)

    def ready(binds: list[str]) -> None:
        sys.stderr.write(f"m3 embed server: serving {embedder.model_id} ({embedder.dim} dims) on {' '.join(binds)} "
                         f"(pid {os.getpid()})\n")
        sys.stderr.flush()

    try:
        trio.run(partial(serve_asgi, app.starlette(), host, port, ready=ready))
    except OSError as exc:
        raise Unavailable(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                          hint="Another process uses the port: stop it or choose another with --port.") from None
    finally:
        scheduler.stop()
