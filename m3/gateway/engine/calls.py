"""A front-end's tool call: relayed to the store's engine, which is started (or replaced when idle and of
another version) on first use. Standard library only, for the quick CLI path.

A call that finds no engine starts one and is then sent; a call the engine dies during is not sent again
(whether it ran is unknown): it fails with ``engine_unavailable`` and the next call starts a new engine.
"""

from __future__ import annotations

import contextlib
from typing import Any

from m3.config import Config
from m3.errors import EngineUnavailable
from m3.gateway.engine import client
from m3.gateway.engine.paths import EnginePaths, engine_paths, settings_fingerprint
from m3.gateway.engine.spawn import ensure_engine

MISMATCH = ("engine_version_mismatch", "engine_settings_mismatch")


def caller_headers(config: Config) -> dict[str, str]:
    """Whom this front-end speaks for: the configured agent and user ('' for none)."""
    return client.identity_headers(config["identity.agent_id"] or "", config["identity.user_id"] or "",
                                   settings_fingerprint(config))


def relay(config: Config, name: str, args: dict[str, Any], *, headers: dict[str, str] | None = None,
          paths: EnginePaths | None = None, connections: client.Connections | None = None,
          watch: client.Watch | None = None) -> tuple[int, Any]:
    """``(HTTP status, JSON body)`` of tool ``name`` run by the engine: the result, or ``{"error": …}``.

    With ``connections`` (a long-lived front-end) the call goes over a kept-alive connection, whose socket
    ``watch`` is given (see :meth:`client.Connections.call_tool`); else over a new one, closed after the
    answer."""
    paths = paths or engine_paths(config)
    headers = headers if headers is not None else caller_headers(config)
    for attempt in range(3):
        try:
            if connections is not None:
                status, body = connections.call_tool(name, args, headers, watch=watch)
            else:
                status, body = client.call_tool(paths.sock, name, args, headers)
        except client.EngineDown:
            ensure_engine(config, paths)  # raises what keeps it from starting
            continue
        except client.EngineLost as exc:
            raise EngineUnavailable(f"the engine went away during {name} ({exc}); whether the call ran is unknown",
                                    details={"log": str(paths.log)}) from None
        if status == 409 and _code(body) in MISMATCH and attempt < 2:
            ensure_engine(config, paths)  # an idle engine of another version is replaced; a busy one refuses
            continue
        return status, body
    raise EngineUnavailable(f"the engine of this store did not take {name}", details={"log": str(paths.log)})


def _code(body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = body["error"].get("code")
        return code if isinstance(code, str) else None
    return None


def flush(config: Config, paths: EnginePaths | None = None) -> None:
    """Wait until the engine has embedded everything written so far (bounded on its side); never raises."""
    paths = paths or engine_paths(config)
    with contextlib.suppress(client.EngineDown, client.EngineLost, OSError):  # else the backlog embeds it later
        client.request(paths.sock, "POST", client.FLUSH_PATH, timeout=config["embed.drain_timeout_s"] + 5.0)
