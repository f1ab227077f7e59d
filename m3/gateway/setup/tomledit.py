"""Add or remove one ``[<table>.<name>]`` of a TOML file (Codex's ``config.toml``) through tomlkit.

tomlkit keeps comments, key order and spacing of everything it was not asked to change, so adding the
table and removing it again gives back the original text (up to a blank line at the end of the file).
"""

from __future__ import annotations

from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable

from m3.errors import ClientConfigMalformed


def _parse(text: str, where: str) -> Any:
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ClientConfigMalformed(f"{where} is not valid TOML: {exc}", details={"file": where}) from None


def _servers(doc: Any, table: str, where: str) -> Any:
    servers = doc.get(table)
    if servers is not None and not isinstance(servers, dict):
        raise ClientConfigMalformed(f"{where}: {table} is not a table", details={"file": where, "key": table})
    return servers


def current(text: str, table: str, name: str, where: str) -> Any:
    """The plain value of ``[table.name]``, or None when it is absent."""
    servers = _servers(_parse(text, where), table, where)
    if servers is None or name not in servers:
        return None
    value = servers[name]
    return value.unwrap() if hasattr(value, "unwrap") else value


def put(text: str, table: str, name: str, entry: dict[str, Any], where: str) -> str:
    """``text`` with ``[table.name]`` set to ``entry`` (a table of scalars, arrays and one-level maps)."""
    doc = _parse(text, where)
    servers = _servers(doc, table, where)
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc.append(table, servers)
    inline_servers = isinstance(servers, InlineTable)  # mcp_servers = { docs = { … } }
    item: Any = tomlkit.inline_table() if inline_servers else tomlkit.table()
    for key, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            item[key] = inline
        else:
            item[key] = value
    if not inline_servers:
        item.add(tomlkit.nl())  # a blank line before whatever table follows
    if name in servers:
        servers[name] = item
    else:
        servers.append(name, item)
    result = tomlkit.dumps(doc)
    return result.rstrip("\n") + "\n" if result.endswith("\n\n") and not text.endswith("\n\n") else result


def drop(text: str, table: str, name: str, where: str) -> str:
    """``text`` without ``[table.name]``; the parent table goes too when it was only implied and is now empty."""
    doc = _parse(text, where)
    servers = _servers(doc, table, where)
    if servers is None or name not in servers:
        return text
    del servers[name]
    if not servers and servers.is_super_table():
        del doc[table]
    result = tomlkit.dumps(doc)
    return result.rstrip("\n") + "\n" if result.endswith("\n\n") else result
