"""The tool registry: every :class:`~m3.protocols.base.ToolSpec` paired with its handler.

Specs live in ``m3.protocols`` (the contract); handlers live in
``m3.gateway.tools`` (how a call becomes actor messages). The registry
refuses to build if a spec lacks a handler or a handler lacks a spec, so
the surfaces that derive from it (MCP, CLI, m3_call, docs) always agree.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from m3.errors import UnknownDomain, UnknownTool
from m3.protocols.base import ToolArgs, ToolResult, ToolSpec

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service

Handler = Callable[["Service", Any, "CallContext"], Awaitable[ToolResult]]


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    handler: Handler

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments, computed once."""
        return self.spec.args.model_json_schema()

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        return self.spec.result.model_json_schema(mode="serialization")


class Registry:
    def __init__(self, specs: Iterable[ToolSpec], handlers: Mapping[str, Handler]):
        specs = list(specs)
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError("duplicate tool names in the registry")
        missing = sorted(set(names) - set(handlers))
        orphans = sorted(set(handlers) - set(names))
        if missing or orphans:
            raise ValueError(f"tools without handlers: {missing}; handlers without specs: {orphans}")
        self._tools = {s.name: Tool(s, handlers[s.name]) for s in specs}

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is None:
            close = difflib.get_close_matches(name, list(self._tools), n=3, cutoff=0.5)
            hint = f"Did you mean {', '.join(close)}?" if close else "Call m3_index to list every tool."
            raise UnknownTool(f"no tool named {name!r}", hint=hint, details={"did_you_mean": close})
        return tool

    def domains(self) -> dict[str, list[Tool]]:
        out: dict[str, list[Tool]] = {}
        for tool in self._tools.values():
            out.setdefault(tool.spec.domain, []).append(tool)
        return out

    def domain(self, name: str) -> list[Tool]:
        domains = self.domains()
        if name not in domains:
            close = difflib.get_close_matches(name, list(domains), n=2, cutoff=0.5)
            hint = f"Did you mean {', '.join(close)}?" if close else f"Domains: {', '.join(sorted(domains))}."
            raise UnknownDomain(f"no tool domain named {name!r}", hint=hint)
        return domains[name]

    def startup(self) -> list[Tool]:
        return [t for t in self._tools.values() if t.spec.startup]


def default_registry() -> Registry:
    """Every tool m3 ships, with its handler."""
    from m3.gateway.tools import HANDLERS
    from m3.protocols.tools import ALL_TOOLS

    return Registry(ALL_TOOLS, HANDLERS)


__all__ = ["Handler", "Registry", "Tool", "ToolArgs", "default_registry"]
