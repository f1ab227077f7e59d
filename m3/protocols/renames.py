"""Renamed tools and arguments: the old names keep working, with a warning naming the new ones.

Declared once here (settings are renamed in ``m3.config.RENAMED_SETTINGS``, admin commands in
``m3.gateway.commands.RENAMED_COMMANDS``); the registry applies the table on every surface (MCP, CLI, HTTP,
``m3_call``) and `m3 doctor` lists it. docs/upgrading.md says how a rename is made and retired.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Renames:
    #: Old tool name → new tool name.
    tools: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: Tool (by its new name) → {old argument name → new argument name}.
    args: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))

    def rows(self) -> list[dict[str, Any]]:
        """Every rename, as ``m3 doctor`` lists them."""
        return ([{"kind": "tool", "old": old, "new": new} for old, new in sorted(self.tools.items())]
                + [{"kind": "argument", "tool": tool, "old": old, "new": new}
                   for tool, names in sorted(self.args.items()) for old, new in sorted(names.items())])


#: The renames m3 ships: none yet, every tool and argument still has its first name.
RENAMES = Renames()
