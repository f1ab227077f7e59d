"""``m3 dashboard``: serve the dashboard on 127.0.0.1:8088 (by default) until stopped.

It is a front-end like ``m3 serve``: with the engine (the default) each tool call is relayed to the store's engine
as agent ``dashboard.agent``; in embedded mode it starts m3 in this process. Off loopback it needs the dashboard
token (``m3 secret set dashboard.token``) and refuses to start without one.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import webbrowser
from typing import Any

import trio

from m3.config import Config
from m3.errors import AddressInUse, InvalidArgument
from m3.gateway.dashboard.app import build_app
from m3.gateway.dashboard.calls import Caller, EngineCaller, ServiceCaller
from m3.gateway.dashboard.security import Policy, is_loopback
from m3.gateway.http_guard import BodyGuard, netloc, serve_asgi

MAX_BODY = 1024 * 1024


def policy_for(config: Config, host: str) -> Policy:
    """The guard's policy; a non-loopback ``host`` without the dashboard token is refused (invalid_argument)."""
    token = config["dashboard.token"] or None
    if not is_loopback(host) and token is None:
        raise InvalidArgument(f"the dashboard listens on {host}, off loopback, and no dashboard token is set",
                              hint="Set one with `m3 secret set dashboard.token` (read from stdin); the browser then "
                                   "asks for it as the password. Or listen on 127.0.0.1.",
                              details={"host": host})
    return Policy(host=host, token=token if not is_loopback(host) else None)


def serve_dashboard(config: Config, caller: Caller, policy: Policy, port: int, *, open_browser: bool = False,
                    shutdown: trio.Event | None = None) -> None:
    app = BodyGuard(build_app(caller, policy), max_bytes=MAX_BODY, timeout_s=config["serve.body_timeout_s"])

    def ready(binds: list[str]) -> None:
        policy.port = int(binds[0].rsplit(":", 1)[1])
        url = f"http://{netloc(policy.host, policy.port)}/"
        sys.stdout.write(json.dumps({"url": url, "agent": caller.agent, "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"m3: the dashboard is on {url} (acting as agent {caller.agent}); Ctrl-C stops it\n")
        if open_browser:
            webbrowser.open(url)

    async def main() -> None:
        try:
            await serve_asgi(app, policy.host, port, ready=ready, shutdown=shutdown)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise AddressInUse(f"cannot listen on {netloc(policy.host, port)}: the address is already in use",
                               details={"host": policy.host, "port": port}) from None

    trio.run(main)


def dashboard(config: Config, ns: argparse.Namespace) -> Any:
    """The CLI command: prints ``{"url", "agent", "pid"}`` once listening, then serves until SIGINT/SIGTERM."""
    from m3.gateway.engine.paths import engine_mode

    host = ns.host or config["dashboard.host"]
    port = config["dashboard.port"] if ns.port is None else ns.port
    agent = ns.agent or config["dashboard.agent"]
    policy = policy_for(config, host)
    user = config["identity.user_id"] or None
    if engine_mode(config) == "engine":
        from m3.gateway.engine.spawn import ensure_engine

        caller = EngineCaller(config, agent, user)
        ensure_engine(config, caller.paths)
        serve_dashboard(config, caller, policy, port, open_browser=ns.open)
        return None
    from m3.gateway.runtime import running

    with running(config, long_lived=True) as service:
        serve_dashboard(config, ServiceCaller(service, agent, user), policy, port, open_browser=ns.open)
    return None
