"""Base classes for messages and tool declarations.

Messages between actors and the arguments and results of tools are frozen
pydantic models: once built they cannot change, so handing one to another
thread shares nothing mutable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator


class Message(BaseModel):
    """A frozen, typed value passed between actors."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=False)


class ToolArgs(BaseModel):
    """Arguments of a tool. Unknown fields are errors, so a typo never passes silently.

    Every string anywhere in the arguments must be storable (no NUL, no lone surrogate), nesting is
    bounded by ``limits.max_json_depth``, and numbers are finite: hostile input gets a coded error here,
    never an error from the database.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any, info: ValidationInfo) -> Any:
        # Imported here: importing the fields module loads m3.protocols.tools, whose modules import this one.
        from m3.protocols.tools.fields import check_strings

        return check_strings(data, info)


class ToolResult(BaseModel):
    """Result of a tool, serialised as one JSON object."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True)
class ToolSpec:
    """The single declaration of a tool.

    The MCP tool, the CLI command ``m3 <domain> <name>``, ``m3_call`` and the
    generated docs all derive from this one object.
    """

    name: str
    domain: str
    args: type[ToolArgs]
    result: type[ToolResult]
    description: str
    destructive: bool = False
    #: Registered with MCP at start-up; the rest are reached via m3_call or tools_load_domain.
    startup: bool = False
    #: Does not change any state (MCP readOnlyHint).
    read_only: bool = False
    examples: tuple[str, ...] = field(default=())

    @property
    def summary(self) -> str:
        """The first sentence of the description (a period followed by a capital ends it, so "e.g. 'x'" does not)."""
        return re.split(r"(?<=\.)\s+(?=[A-Z])", self.description.strip(), maxsplit=1)[0]

    @property
    def short_name(self) -> str:
        """The CLI alias without the domain prefix: ``memory_write`` -> ``write``."""
        prefix = self.domain + "_"
        return self.name[len(prefix):] if self.name.startswith(prefix) else self.name
