"""The engine process: the actors of one store behind its Unix socket (``python -m m3.gateway.engine``).

It serves the tool routes (``POST /v1/tools/{name}``), MCP over Streamable HTTP (``/mcp``) and
``/v1/engine/status|stats|stop`` with hypercorn on the socket, runs the background work (the embedder's
backlog), and exits when stopped, on SIGTERM/SIGINT, or after ``engine.idle_exit_s`` without a call.
Callers are trusted by the socket (owner-only): ``X-M3-Agent``/``X-M3-User`` say whom a front-end speaks for.
A request of another m3 version (``X-M3-Version``) is refused with ``engine_version_mismatch`` (409).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Any

import trio
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from m3 import __version__
from m3.actors.base import percentiles
from m3.config import Config, load_config
from m3.errors import M3Error
from m3.gateway.engine import manifest
from m3.gateway.engine.client import (
    FLUSH_PATH,
    STATS_PATH,
    STATUS_PATH,
    STOP_PATH,
)
from m3.gateway.engine.gate import Gate, header_identity
from m3.gateway.engine.paths import READY_FD_ENV, EnginePaths, bind, engine_paths, make_run_dir, settings_fingerprint
from m3.gateway.engine.shared import shared_store_work
from m3.gateway.service import CallContext, Service

if TYPE_CHECKING:
    from m3.gateway.registry import Registry

log = logging.getLogger(__name__)


_LATENCIES_KEPT = 2048


class EngineState:
    """What the engine counts: calls in flight, handled, and each actor's recent latencies."""

    def __init__(self, paths: EnginePaths, config: Config):
        self.paths = paths
        self.config = config
        self.started = time.time()
        self.inflight = 0
        self.requests = 0
        self.last_activity = time.monotonic()
        self.latencies: dict[str, deque[float]] = {}
        self.stop = trio.Event()
        self.shared: Any = None  # a SharedWork (m3.gateway.engine.shared)
        self.settings = settings_fingerprint(config)
        self.scheduler: Any = None
        self.mcp: Any = None  # the LazyMcp of /mcp (m3.gateway.engine.mcp_endpoint)

    def record(self, actor: str, seconds: float) -> None:
        self.latencies.setdefault(actor, deque(maxlen=_LATENCIES_KEPT)).append(seconds)

    def status(self) -> dict[str, Any]:
        return {"version": __version__, "settings": self.settings, "pid": os.getpid(), "store_key": self.paths.key,
                "socket": str(self.paths.sock), "log": str(self.paths.log), "started_at": self.started,
                "uptime_s": round(time.time() - self.started, 3), "inflight": self.inflight,
                "requests": self.requests, "idle_s": round(time.monotonic() - self.last_activity, 3),
                "idle_exit_s": self.config["engine.idle_exit_s"],
                "mcp_started": self.mcp is not None and self.mcp.started,
                **(self.shared.status() if self.shared is not None else {})}


class MeasuredService(Service):
    """A :class:`Service` that times every call by the actor that answers it (``handler`` for orchestrating tools)."""

    def __init__(self, service: Service, state: EngineState):
        super().__init__(service.config, service.system, service.registry)
        self._state = state
        self.engine_status = state.status

    async def call(self, name: str, raw_args: dict[str, Any] | None, ctx: CallContext) -> dict[str, Any]:
        begun = time.perf_counter()
        try:
            return await super().call(name, raw_args, ctx)
        finally:
            self._state.record(self._actor_of(name), time.perf_counter() - begun)

    def _actor_of(self, name: str) -> str:
        try:
            spec = self.registry.get(name).spec
        except Exception:
            return "unknown"
        return spec.actor or "handler"


def thread_cpu() -> dict[str, float]:
    """CPU seconds used so far by each live thread of this process, by thread name (threads of one name summed):
    where the engine's CPU goes (the gateway runs on ``MainThread``, each actor on its own thread)."""
    used: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
        except (OSError, AttributeError):  # the thread ended meanwhile; or no per-thread clocks on this system
            continue
        used[thread.name] = round(used.get(thread.name, 0.0) + seconds, 4)
    return used


def engine_routes(service: Service, state: EngineState) -> list[Route]:
    async def status(_request: Request) -> Response:
        return JSONResponse(state.status())

    async def stats(_request: Request) -> Response:
        actors = []
        for row in service.system.statistics():
            # latency: the actor's own handling time per message; call_latency: whole tool calls it answered.
            actors.append({**row, "call_latency": percentiles(state.latencies.get(row["actor"]))})
        handler = {"actor": "handler", "call_latency": percentiles(state.latencies.get("handler"))}
        return JSONResponse({**state.status(), "actors": [*actors, handler], "thread_cpu_s": thread_cpu(),
                             "gc_collections": [generation["collections"] for generation in gc.get_stats()],
                             "gc_frozen": gc.get_freeze_count()})

    async def stop_soon() -> None:
        state.stop.set()

    async def stop(_request: Request) -> Response:
        return JSONResponse({"stopping": True, "pid": os.getpid()}, background=BackgroundTask(stop_soon))

    async def flush(_request: Request) -> Response:
        """Wait (bounded) until every memory written so far has its vector stored and supersession ran."""
        limit: float = service.config["embed.drain_timeout_s"]
        try:
            await trio.to_thread.run_sync(service.system.wait_embedded, limit, abandon_on_cancel=True)
        except M3Error as exc:
            return JSONResponse({"flushed": False, "reason": exc.message})
        return JSONResponse({"flushed": True})

    return [Route(STATUS_PATH, status, methods=["GET"]), Route(STATS_PATH, stats, methods=["GET"]),
            Route(STOP_PATH, stop, methods=["POST"]), Route(FLUSH_PATH, flush, methods=["POST"])]


EMBED_PATH = "/embed"


def _embed_routes(service: Service) -> tuple[list[Any], Any]:
    """When the engine embeds in process: the embed server's routes (``/embed/v1/embeddings`` …) over the
    engine's own model, so the machine loads it once. With ``embed.backend = http`` or a shared ``embed.url``
    the model lives elsewhere (``m3 embedder serve``) and there is nothing to mount."""
    config = service.config
    if config["embed.backend"] == "http" or config["embed.url"]:
        return [], None
    from starlette.routing import Mount

    from m3.embed.scheduler import Scheduler
    from m3.gateway.embed_server import EmbedApp

    backend = service.system.embedder_backend
    scheduler = Scheduler(backend, max_batch=config["embed.max_batch"]).start()
    return [Mount(EMBED_PATH, app=EmbedApp(backend, scheduler, key=config["embed.key"]).starlette())], scheduler


def build_engine_app(service: Service, state: EngineState) -> ASGIApp:
    """``/mcp`` (built on its first request), the tool routes, the OpenAPI document and the engine's own routes,
    behind the gate."""
    from starlette.applications import Starlette

    from m3.gateway.engine.mcp_endpoint import LazyMcp
    from m3.gateway.http_guard import BodyGuard
    from m3.gateway.rest import MCP_PATH, rest_routes

    of_headers = header_identity(service.config)
    embed_routes, scheduler = _embed_routes(service)
    state.scheduler = scheduler

    def session_manager() -> Any:
        from mcp.server.transport_security import TransportSecuritySettings

        from m3.gateway.mcp_server import build_server

        server = build_server(service, lambda ctx: of_headers(ctx.request.headers, ctx.request.scope)
                              if ctx.request is not None else of_headers({}))
        server.streamable_http_app(
            streamable_http_path=MCP_PATH, json_response=True,
            # Reached only through an owner-only socket: there is no browser to rebind a name for.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        return server.session_manager

    mcp = state.mcp = LazyMcp(session_manager)
    app = Starlette(routes=[Route(MCP_PATH, endpoint=mcp),
                            *rest_routes(service, lambda request: of_headers(request.headers, request.scope)),
                            *engine_routes(service, state), *embed_routes],
                    lifespan=mcp.lifespan)
    # The gate behind the guard: a refused request's body has been read, so the connection stays usable.
    return BodyGuard(Gate(app, state, service), max_bytes=service.config["serve.max_body_bytes"],
                     timeout_s=service.config["serve.body_timeout_s"])


async def serve_engine(app: ASGIApp, sock_fd: int, state: EngineState, ready: Any) -> None:
    """Serve on the listening socket ``sock_fd`` (hypercorn takes and closes it) until stopped (route, signal or
    idle); ``ready`` is called once listening."""
    from hypercorn.config import Config as HypercornConfig
    from hypercorn.trio import serve

    hc = HypercornConfig()
    hc.bind = [f"fd://{sock_fd}"]
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.keep_alive_timeout = 75.0  # front-ends hold a connection between calls
    async with trio.open_nursery() as nursery:
        async with trio.open_nursery() as watchers:
            watchers.start_soon(_stop_on_signals, state.stop)
            await nursery.start(partial(serve, app, hc, shutdown_trigger=state.stop.wait))  # type: ignore[arg-type]
            ready()
            state.last_activity = time.monotonic()  # the idle clock starts once the engine listens
            watchers.start_soon(_stop_when_idle, state)
            await state.stop.wait()
            watchers.cancel_scope.cancel()
        nursery.cancel_scope.deadline = trio.current_time() + 10  # bounded graceful close of open streams


async def _stop_on_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _signum in signals:
            stop.set()
            return


async def _stop_when_idle(state: EngineState) -> None:
    idle_s: float = state.config["engine.idle_exit_s"]
    if idle_s <= 0:
        return
    while not state.stop.is_set():
        left = state.last_activity + idle_s - time.monotonic()
        if left <= 0 and state.inflight == 0:
            log.info("engine idle for %.0f s: exiting", idle_s)
            state.stop.set()
            return
        await trio.sleep(max(left, 1.0))  # a timer, woken to re-read the idle clock


def _announce(document: dict[str, Any]) -> None:
    """Tell the starter (the pipe of M3_ENGINE_READY_FD, else stdout) one JSON line, once."""
    line = (json.dumps(document) + "\n").encode("utf-8")
    fd_text = os.environ.pop(READY_FD_ENV, None)
    if fd_text is None:
        sys.stdout.write(line.decode("utf-8"))
        sys.stdout.flush()
        return
    fd = int(fd_text)
    try:
        os.write(fd, line)
    except OSError:
        pass  # the starter gave up waiting; serve anyway
    finally:
        os.close(fd)


def run(config: Config) -> int:
    """The engine's life: take the store's life lock, bind, start the actors, serve, stop in order."""
    import fcntl

    from m3.gateway.runtime import running

    paths = engine_paths(config)
    make_run_dir(paths.run_dir)
    pid_fd = os.open(paths.pid, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(pid_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(pid_fd)
        _announce({"error": {"code": "engine_running", "message": "an engine already runs for this store"}})
        return 0
    try:
        os.ftruncate(pid_fd, 0)
        os.pwrite(pid_fd, str(os.getpid()).encode("ascii"), 0)
        sock_fd = bind(paths.sock).detach()  # only the life lock's holder binds or removes the socket
        try:
            with shared_store_work(config) as shared_work, running(config, background=shared_work.background,
                                                                   long_lived=True) as plain:
                state = EngineState(paths, config)
                state.shared = shared_work
                service = MeasuredService(plain, state)
                shared_work.attach(plain.system)
                _write_manifest(paths, service.registry)
                ready = {"ready": True, "pid": os.getpid(), "version": __version__, "socket": str(paths.sock)}
                log.info("engine %s listening on %s", os.getpid(), paths.sock)
                app = build_engine_app(service, state)
                settle_heap()
                try:
                    trio.run(serve_engine, app, sock_fd, state, lambda: _announce(ready))
                finally:
                    if state.scheduler is not None:
                        state.scheduler.stop()
        finally:
            paths.sock.unlink(missing_ok=True)
    finally:
        os.close(pid_fd)  # releases the life lock; the file stays (a waiter may hold it open)
    return 0


def settle_heap() -> None:
    """Exclude what start-up built (registry, schemas, SQLAlchemy, the model's wrappers: ~190k objects) from
    the cyclic garbage collector's full collections. Each full collection scanned all of it with the GIL held,
    some hundred ms in which no call moved: the longest waits of a burst of writes (docs/benchmarks.md, "One
    engine per store"). What start-up built lives as long as the engine, so it is never garbage."""
    gc.collect()
    gc.freeze()


def _write_manifest(paths: EnginePaths, registry: Registry) -> None:
    if manifest.load(paths.manifest) is None:
        manifest.write(paths.manifest, manifest.build(registry))


def main() -> int:
    config = load_config()
    from m3.gateway.runtime import setup_logging

    setup_logging(config)
    try:
        return run(config)
    except Exception as exc:
        log.exception("the engine failed")
        _announce({"error": {"code": getattr(exc, "code", "internal_error"),
                             "message": getattr(exc, "message", str(exc)), "hint": getattr(exc, "hint", None)}})
        return 1
