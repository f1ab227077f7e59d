"""``m3 engine start|stop|status``."""

from __future__ import annotations

import argparse
from typing import Any

from m3.config import Config
from m3.gateway.engine import client
from m3.gateway.engine.paths import engine_paths
from m3.gateway.engine.spawn import engine_status, ensure_engine, stop_engine


def start(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    before = client.status(engine_paths(config).sock)
    found = ensure_engine(config)
    return {"running": True, "started": before is None or before.get("pid") != found.get("pid"), **found}


def stop(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    return stop_engine(config)


def status(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    found = engine_status(config)
    if getattr(ns, "stats", False) and found["running"]:
        code, body = client.request(engine_paths(config).sock, "GET", client.STATS_PATH, timeout=10.0)
        if code == 200 and isinstance(body, dict):
            found = {"running": True, **body}
    return found
