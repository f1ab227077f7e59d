"""``m3 secret set|get|list|delete|migrate``: the encrypted secrets vault (m3/crypto/vault.py).

Administration commands of the local OS user, not tools: no agent, token or MCP client reaches them. ``set``
reads the value from stdin (without echo on a terminal), never from the command line, where it would land in
the shell's history and the process list; ``get`` prints the plaintext, for the user who owns the files.
``m3 config set-secret`` and ``unset-secret`` are the earlier spellings of ``secret set`` and ``secret delete``
and keep working with a warning.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from m3.config import SETTINGS, Config, migrate_plaintext, set_secret, setting
from m3.errors import ConfigError, NotFound

HIDDEN = "<set, hidden>"


def secret_set(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    setting(ns.key)
    # Never from the command line (shell history, process list); from a terminal without echo.
    raw = getpass.getpass(f"{ns.key}: ", stream=sys.stderr) if sys.stdin.isatty() else sys.stdin.read()
    raw = raw.strip()
    if not raw:
        raise ConfigError(f"no value for {ns.key} on stdin",
                          hint=f"Pipe it in, e.g. `printf %s \"$VALUE\" | m3 secret set {ns.key}`.")
    if ns.key == "store.url":
        from m3.store.dialect import parse_url

        parse_url(raw)  # refuse a malformed URL now, without repeating it
    path = set_secret(config, ns.key, raw)
    return _shadowed(config, ns.key, {"file": str(path), "key": ns.key, "value": HIDDEN})


def secret_get(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    setting(ns.key)
    vault = config.vault()
    migrate_plaintext(vault)
    value = vault.get(ns.key) if vault.exists() else None
    if value is None:
        raise NotFound(f"no secret {ns.key} in the vault", hint=f"Set it with `m3 secret set {ns.key}`.")
    return _shadowed(config, ns.key, {"key": ns.key, "value": value})


def secret_list(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    vault = config.vault()
    migrate_plaintext(vault)
    held = set(vault.names()) if vault.exists() else set()
    rows = [{"key": s.key, "set": s.key in held, "origin": config.origin(s.key), "env": s.env_var}
            for s in SETTINGS if s.secret]
    return {**vault.status(), "secrets": rows}


def secret_delete(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    setting(ns.key)
    vault = config.vault()
    migrate_plaintext(vault)
    held = vault.exists() and ns.key in vault.names()
    path = set_secret(config, ns.key, None) if held else vault.path
    return _shadowed(config, ns.key, {"file": str(path), "key": ns.key, "value": None, "deleted": held})


def secret_migrate(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    vault = config.vault()
    moved = migrate_plaintext(vault)
    return {**vault.status(), "migrated": moved}


def _shadowed(config: Config, key: str, result: dict[str, Any]) -> dict[str, Any]:
    if config.origin(key) == "env":
        result["warning"] = f"{setting(key).env_var} is set in the environment and overrides the secret"
    return result
