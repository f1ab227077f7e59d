"""The tool manifest: every tool's name, domain, flags and schemas as one JSON file, ``<run>/tools-<version>.json``.

Front-ends build their command line (``m3 <domain> <tool> --arg …``) and their MCP tool list from it, so a
one-shot command imports neither pydantic nor SQLAlchemy nor the registry. Whoever needs it first writes it
(atomically, 0600): the engine on start, or a front-end that found none. :func:`load` is standard library only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3 import __version__

if TYPE_CHECKING:
    from m3.gateway.registry import Registry


def field_kind(schema: dict[str, Any]) -> str:
    """How the command line reads an argument: ``json`` (objects, arrays), ``bool`` (a bare flag) or ``value``."""
    types = {schema.get("type")} | {s.get("type") for s in schema.get("anyOf", [])}
    if types & {"object", "array"}:
        return "json"
    if "boolean" in types:
        return "bool"
    return "value"


def build(registry: Registry, *, schemas: bool = True) -> dict[str, Any]:
    """The manifest of ``registry`` (the slow path: pydantic schemas); without ``schemas``, what a parser needs."""
    tools = []
    for tool in registry:
        spec = tool.spec
        properties = tool.input_schema["properties"]
        tools.append({
            "name": spec.name, "short_name": spec.short_name, "domain": spec.domain, "summary": spec.summary,
            "description": spec.description, "startup": spec.startup, "read_only": spec.read_only,
            "destructive": spec.destructive,
            **({"input_schema": tool.input_schema, "output_schema": tool.output_schema} if schemas else {}),
            "fields": [{"name": name, "kind": field_kind(properties[name]), "help": info.description or ""}
                       for name, info in spec.args.model_fields.items()],
            # Renamed tools and arguments (m3/protocols/renames.py): old spellings the command line still takes.
            "old_names": [old for old, new in registry.renames.tools.items() if new == spec.name],
            "renamed_args": dict(registry.renames.args.get(spec.name, {})),
        })
    if not schemas:
        return {"version": __version__, "tools": tools}
    from m3.gateway.mcp_server import INSTRUCTIONS

    return {"version": __version__, "instructions": INSTRUCTIONS, "tools": tools}


def load(path: Path) -> dict[str, Any] | None:
    """The manifest at ``path`` if it is there and of this version."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == __version__ else None


def write(path: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` to ``path`` atomically (0600 from its first byte)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, ensure_ascii=False)
    os.replace(tmp, path)


def ensure(path: Path) -> dict[str, Any]:
    """The manifest at ``path``, built from the registry and written there when missing or stale."""
    found = load(path)
    if found is not None:
        return found
    from m3.gateway.engine.paths import make_run_dir
    from m3.gateway.registry import default_registry

    manifest = build(default_registry())
    make_run_dir(path.parent)
    write(path, manifest)
    return manifest
