"""Admin commands for the store: ``m3 store migrate|status``, ``m3 postgres start|stop|status``.

Nothing here prints a secret: store URLs are shown with the password replaced by ``***`` (secrets themselves:
secret_commands.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from m3.config import Config, set_in_file
from m3.store import embedded_pg  # the standard library only: the optional server is imported when needed

EMBEDDED_DATABASE = "m3"


# -- secrets (the commands: secret_commands.py) ---------------------------------------------------

def password_warning(key: str, raw: str) -> str | None:
    """For ``config set``: a store URL with a password is better kept as a secret."""
    if key != "store.url":
        return None
    from m3.store.dialect import parse_url

    if parse_url(raw).password:
        return ("the URL holds a password and m3_config.toml is a plain file; "
                "`m3 secret set store.url` keeps it encrypted in the secrets vault instead")
    return None


# -- m3 store migrate | status ---------------------------------------------------------------------

def store_migrate(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    from m3.store.engine import StoreOptions, migrate_store

    before, after = migrate_store(StoreOptions(url=config.store_url, busy_timeout_ms=config["store.busy_timeout_ms"]))
    return {**where_of(config), "from": before or None, "to": after, "migrated": before != after}


def store_status(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    from m3.embed.factory import configured_model
    from m3.store.dialect import dialect_for
    from m3.store.engine import StoreOptions, current_revision, open_engine
    from m3.store.migrations import HEAD
    from m3.store.status import describe

    where = {**where_of(config), "isolation": isolation_of(config)}
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


def isolation_of(config: Config) -> dict[str, Any]:
    """Which isolation mode is in force, and where that came from (a store used with it off keeps working
    with ``isolation.enforce = false``)."""
    on: bool = config["isolation.enforce"]
    return {"enforce": on, "mode": "private" if on else "shared", "origin": config.origin("isolation.enforce"),
            "means": ("scope=agent memories and chat rows are visible only to their agent and the agents they "
                      "are shared with" if on else "every agent reads every memory and chat row, whatever its scope")}


def where_of(config: Config) -> dict[str, Any]:
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


# -- m3 store export | import ----------------------------------------------------------------------

def store_export(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    """admin_export as the local user, to ``--out`` (resolved here: the tool takes absolute paths)."""
    return _as_local_user(config, "admin_export", {"path": str(Path(ns.out).expanduser().resolve()),
                                                   "overwrite": ns.overwrite})


def store_import(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    """admin_import as the local user, from ``--in``."""
    return _as_local_user(config, "admin_import", {"path": str(Path(ns.source).expanduser().resolve()),
                                                   "merge": ns.merge})


def _as_local_user(config: Config, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run ``tool`` where the store's other calls run: in its engine (engine mode), else in this process."""
    import trio

    from m3.gateway.engine.paths import engine_mode
    from m3.gateway.runtime import running
    from m3.gateway.service import CallContext

    if engine_mode(config) == "engine":
        from m3.errors import M3Error, all_error_classes
        from m3.gateway.engine.calls import relay

        _status, body = relay(config, tool, args)
        if isinstance(body, dict) and set(body) == {"error"}:
            error = body["error"]
            coded = {cls.code: cls for cls in all_error_classes()}.get(str(error.get("code")), M3Error)
            raise coded(str(error.get("message")), hint=error.get("hint"), details=error.get("details"))
        relayed: dict[str, Any] = body
        return relayed

    ctx = CallContext(agent_id=config["identity.agent_id"] or None, user_id=config["identity.user_id"] or None)
    with running(config, background=False) as svc:
        result: dict[str, Any] = trio.run(svc.call, tool, args, ctx)
    return result
