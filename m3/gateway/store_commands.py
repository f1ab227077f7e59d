"""Admin commands for the store: secrets, ``m3 store migrate|status``, ``m3 postgres start|stop|status``.

Nothing here prints a secret: store URLs are shown with the password
replaced by ``***``, and ``config set-secret`` reads the value from stdin
(without echo on a terminal), never from the command line, where it would
land in the shell's history and the process list.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from m3.config import Config, set_in_file, set_secret, setting
from m3.errors import ConfigError
from m3.store import embedded_pg  # the standard library only: the optional server is imported when needed

HIDDEN = "<set, hidden>"
EMBEDDED_DATABASE = "m3"


# -- secrets ---------------------------------------------------------------------------------------

def set_secret_command(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    setting(ns.key)
    # Never from the command line (shell history, process list); from a terminal without echo.
    raw = getpass.getpass(f"{ns.key}: ", stream=sys.stderr) if sys.stdin.isatty() else sys.stdin.read()
    raw = raw.strip()
    if not raw:
        raise ConfigError(f"no value for {ns.key} on stdin",
                          hint=f"Pipe it in, e.g. `printf %s \"$URL\" | m3 config set-secret {ns.key}`.")
    if ns.key == "store.url":
        from m3.store.dialect import parse_url

        parse_url(raw)  # refuse a malformed URL now, without repeating it
    path = set_secret(config, ns.key, raw)
    return _secret_result(config, ns.key, path, HIDDEN)


def unset_secret_command(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    path = set_secret(config, ns.key, None)
    return _secret_result(config, ns.key, path, None)


def _secret_result(config: Config, key: str, path: Path, value: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"file": str(path), "key": key, "value": value}
    if config.origin(key) == "env":
        result["warning"] = f"{setting(key).env_var} is set in the environment and overrides the secret"
    return result


def password_warning(key: str, raw: str) -> str | None:
    """For ``config set``: a store URL with a password is better kept as a secret."""
    if key != "store.url":
        return None
    from m3.store.dialect import parse_url

    if parse_url(raw).password:
        return ("the URL holds a password and m3_config.toml is a plain file; "
                "`m3 config set-secret store.url` keeps it in an owner-only file instead")
    return None


# -- m3 store migrate | status ---------------------------------------------------------------------

def store_migrate(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    from m3.store.engine import StoreOptions, migrate_store

    before, after = migrate_store(StoreOptions(url=config.store_url, busy_timeout_ms=config["store.busy_timeout_ms"]))
    return {**_where(config), "from": before or None, "to": after, "migrated": before != after}


def store_status(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    from m3.embed.factory import configured_model
    from m3.store.dialect import dialect_for
    from m3.store.engine import StoreOptions, current_revision, open_engine
    from m3.store.migrations import HEAD
    from m3.store.status import describe

    where = {**_where(config), "isolation": _isolation(config)}
    if not dialect_for(config.store_url).exists(config.store_url):
        return {**where, "schema": {"revision": None, "head": HEAD, "current": False}, "exists": False,
                "hint": "No store yet: m3 creates it on first use, or run `m3 store migrate`."}
    engine = open_engine(StoreOptions(url=config.store_url), "reader")
    try:
        revision = current_revision(engine)
        result: dict[str, Any] = {**where, "schema": {"revision": revision or None, "head": HEAD,
                                                                "current": revision == HEAD}}
        if not revision:
            result["hint"] = "The store has no schema yet: run `m3 store migrate` (m3 also migrates on start)."
            return result
        with engine.connect() as conn:
            result.update(describe(conn, configured_model(config)))
            conn.rollback()
    finally:
        engine.dispose()
    return result


def _isolation(config: Config) -> dict[str, Any]:
    """Which isolation mode is in force, and where that came from (a store used with it off keeps working
    with ``isolation.enforce = false``)."""
    on: bool = config["isolation.enforce"]
    return {"enforce": on, "mode": "private" if on else "shared", "origin": config.origin("isolation.enforce"),
            "means": ("scope=agent memories and chat rows are visible only to their agent and the agents they "
                      "are shared with" if on else "every agent reads every memory and chat row, whatever its scope")}


def _where(config: Config) -> dict[str, Any]:
    from m3.store.dialect import parse_url
    from m3.store.postgres import redact

    url = parse_url(config.store_url)
    return {"backend": url.get_backend_name(), "url": redact(url), "url_origin": config.origin("store.url")}


# -- m3 postgres start | stop | status -------------------------------------------------------------

def pgdata_of(config: Config) -> Path:
    return config.engine_root / "postgres" / "data"


def postgres_start(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    from m3.store import postgres
    from m3.store.engine import StoreOptions, migrate_store

    pgdata = pgdata_of(config)
    was_running = embedded_pg.status(pgdata) is not None
    cluster = embedded_pg.ensure_cluster(pgdata, port=ns.port)
    postgres.create_database(cluster.url("postgres"), EMBEDDED_DATABASE)
    url = cluster.url(EMBEDDED_DATABASE)
    migrate_store(StoreOptions(url=url))
    result = {**_cluster_info(cluster, pgdata), "started": not was_running}
    if ns.configure:
        set_in_file(config, "store.url", url)
        result["configured"] = str(config.file)
    elif config.store_url != url:
        result["hint"] = f"Use it with `m3 config set store.url '{url}'` (or M3_STORE_URL)."
    return result


def postgres_stop(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    pgdata = pgdata_of(config)
    return {"pgdata": str(pgdata), "stopped": embedded_pg.stop(pgdata)}


def postgres_status(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    pgdata = pgdata_of(config)
    cluster = embedded_pg.status(pgdata)
    if cluster is None:
        return {"running": False, "pgdata": str(pgdata), "initialised": (pgdata / "PG_VERSION").exists(),
                "hint": "Start it with `m3 postgres start`."}
    return _cluster_info(cluster, pgdata)


def _cluster_info(cluster: embedded_pg.Cluster, pgdata: Path) -> dict[str, Any]:
    return {"running": True, "pid": cluster.pid, "pgdata": str(pgdata), "socket_dir": str(cluster.socket_dir),
            "port": cluster.port, "version": embedded_pg.server_version(pgdata), "log": str(pgdata / "server.log"),
            "url": cluster.url(EMBEDDED_DATABASE)}
