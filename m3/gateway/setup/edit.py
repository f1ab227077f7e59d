"""The new text of one client's configuration file with m3's server entry set or removed.

Pure text in, text out: nothing here touches the disk. A file the client could not read either (bad
JSON, comments in a strict-JSON file, bad TOML, a server table that is not an object) raises
:class:`ClientConfigMalformed`.
"""

from __future__ import annotations

import json
from typing import Any

from m3.errors import ClientConfigMalformed
from m3.gateway.setup import jsonedit, tomledit
from m3.gateway.setup.clients import Client

SERVER_NAME = "m3"


def current_entry(client: Client, text: str, where: str) -> Any:
    """m3's entry in ``text`` as plain data, or None when there is none."""
    if client.format == "toml":
        return tomledit.current(text, client.containers[0][0], SERVER_NAME, where)
    root = _root(client, text, where)
    found = _container(client, root, where)
    if found is None:
        return None
    member = found[1].member(SERVER_NAME)
    return member.node.value if member is not None else None


def with_entry(client: Client, text: str | None, entry: dict[str, Any], where: str) -> str:
    """``text`` (None: the file does not exist) with m3's entry set to ``entry``."""
    if client.format == "toml":
        return tomledit.put(text or "", client.containers[0][0], SERVER_NAME, entry, where)
    if text is None or not text.strip():
        text = json.dumps(dict(client.skeleton), indent=2) + "\n"
    root = _root(client, text, where)
    unit = jsonedit.indent_unit(text, root)
    found = _container(client, root, where)
    if found is not None:
        return jsonedit.set_member(text, found[1], SERVER_NAME, entry, unit)
    last = client.containers[-1]
    depth = max(d for d in range(len(last)) if _walk(root, last[:d]) is not None)
    holder = _walk(root, last[:depth])
    if holder is None or holder.members is None:
        raise ClientConfigMalformed(f"{where}: {'.'.join(last[:depth])} is not an object",
                                    details={"file": where, "key": ".".join(last[:depth])})
    value: Any = {SERVER_NAME: entry}
    for key in reversed(last[depth + 1:]):
        value = {key: value}
    return jsonedit.set_member(text, holder, last[depth], value, unit)


def without_entry(client: Client, text: str, where: str) -> str:
    """``text`` without m3's entry (the object that held it stays, if empty)."""
    if client.format == "toml":
        return tomledit.drop(text, client.containers[0][0], SERVER_NAME, where)
    found = _container(client, _root(client, text, where), where)
    if found is None or found[1].member(SERVER_NAME) is None:
        return text
    return jsonedit.delete_member(text, found[1], SERVER_NAME)


def _root(client: Client, text: str, where: str) -> jsonedit.Node:
    try:
        root = jsonedit.parse(text, comments=client.format == "jsonc")
    except jsonedit.JsonSyntaxError as exc:
        flavour = "JSON with comments" if client.format == "jsonc" else "JSON"
        raise ClientConfigMalformed(f"{where} is not valid {flavour}: {exc}",
                                    details={"file": where, "line": exc.line, "column": exc.column}) from None
    if root.members is None:
        raise ClientConfigMalformed(f"{where} does not hold a JSON object", details={"file": where})
    return root


def _walk(root: jsonedit.Node, path: tuple[str, ...]) -> jsonedit.Node | None:
    node: jsonedit.Node | None = root
    for key in path:
        member = node.member(key) if node is not None else None
        node = member.node if member is not None else None
    return node


def _container(client: Client, root: jsonedit.Node, where: str) -> tuple[tuple[str, ...], jsonedit.Node] | None:
    """The key path and node of the object holding the servers: the first of the client's candidates that exists."""
    for path in client.containers:
        node = _walk(root, path)
        if node is None:
            continue
        if len(path) > 1 and node.members is not None and {"type", "command"} & set(node.value):
            continue  # a server that happens to be named like the nested container (OpenCode's "servers")
        if node.members is None:
            raise ClientConfigMalformed(f"{where}: {'.'.join(path)} is not an object",
                                        details={"file": where, "key": ".".join(path)})
        return path, node
    return None
