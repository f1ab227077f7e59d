"""Administrative CLI commands that are not tools (config, serving).

Each is declared once here: its domain and name (``m3 <domain> <name>``),
a parser configurator and a runner returning the JSON document to print
(or None when the command prints nothing, like a server).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from m3.config import Config, set_in_file
from m3.gateway import store_commands


@dataclass(frozen=True)
class AdminCommand:
    domain: str
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[Config, argparse.Namespace], Any]


def _no_args(_: argparse.ArgumentParser) -> None:
    return None


def _config_show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--origin", action="store_true", help="Also say where each value came from.")


def _config_show(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    rows = config.rows()
    if ns.origin:
        settings: dict[str, Any] = {r["key"]: {"value": r["value"], "origin": r["origin"], "env": r["env"]}
                                    for r in rows}
    else:
        settings = {r["key"]: r["value"] for r in rows}
    return {"file": str(config.file), "home": str(config.home), "settings": settings}


def _config_set_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("key", help="A setting such as search.k (see `m3 config show`).")
    p.add_argument("value", help="The new value; lists are comma-separated.")


def _config_set(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    value = set_in_file(config, ns.key, ns.value)
    from m3.config import setting

    s = setting(ns.key)
    shown = "<set, hidden>" if s.secret else value
    result: dict[str, Any] = {"file": str(config.file), "key": ns.key, "value": shown}
    if config.origin(ns.key) == "env":
        result["warning"] = f"{s.env_var} is set in the environment and overrides the file"
    elif config.origin(ns.key) == "secret":
        result["warning"] = "the secrets file (`m3 config set-secret`) overrides the file"
    plain_password = store_commands.password_warning(s.key, str(value))
    if plain_password:
        result["warning"] = "; ".join(w for w in (result.get("warning"), plain_password) if w)
    return result


def _mcp_serve(config: Config, ns: argparse.Namespace) -> None:
    from m3.gateway.mcp_server import serve_stdio

    serve_stdio(config)


ADMIN_COMMANDS: tuple[AdminCommand, ...] = (
    AdminCommand("config", "show", "Print every setting (with --origin: where it came from).",
                 _config_show_args, _config_show),
    AdminCommand("config", "set", "Write one setting into m3_config.toml.", _config_set_args, _config_set),
    AdminCommand("mcp", "serve", "Serve MCP on stdio (the default when m3 runs without arguments).",
                 _no_args, _mcp_serve),
    # -- the store (issue 4) --
    AdminCommand("config", "set-secret", "Store a secret setting (store.url) read from stdin in an owner-only file.",
                 store_commands.secret_args, store_commands.set_secret_command),
    AdminCommand("config", "unset-secret", "Remove a secret setting from the secrets file.",
                 store_commands.secret_args, store_commands.unset_secret_command),
    AdminCommand("store", "migrate", "Bring the store's schema to the newest revision.",
                 _no_args, store_commands.store_migrate),
    AdminCommand("store", "status", "Backend, URL (password hidden), schema revision and counts of the store.",
                 _no_args, store_commands.store_status),
    AdminCommand("postgres", "start", "Start the embedded PostgreSQL (pgvector) under the engine root; "
                 "prints its store URL.", store_commands.postgres_start_args, store_commands.postgres_start),
    AdminCommand("postgres", "stop", "Stop the embedded PostgreSQL.", _no_args, store_commands.postgres_stop),
    AdminCommand("postgres", "status", "Whether the embedded PostgreSQL runs, and its URL.",
                 _no_args, store_commands.postgres_status),
)
