"""Base classes for messages and tool declarations.

Messages between actors and the arguments and results of tools are frozen
pydantic models: once built they cannot change, so handing one to another
thread shares nothing mutable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator

R = TypeVar("R")

#: The actors a :class:`ToolSpec` may name: the attributes of ``m3.actors.system.ActorSystem`` that are handles,
#: and ``routers`` (handoffs and notifications, through the receiver's router when one runs).
ACTORS: tuple[str, ...] = ("writer", "searcher", "embedder", "directory", "tasks", "entities", "sync", "routers")


class Message(BaseModel):
    """A frozen, typed value passed between actors."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=False)


class Request(Message, Generic[R]):
    """A message that expects one reply of type ``R``: ``class GetMemory(Request["memory.MemoryRecord"])``.

    ``bridge.ask`` and ``ActorHandle.ask`` return ``R`` for a ``Request[R]``, so mypy checks the reply
    where it is used. ``R`` may be a string (a module imported under TYPE_CHECKING) when the module of
    ``R`` imports the request, as a tool module does for its spec.
    """


def reply_type(message: type[Request[Any]]) -> Any:
    """The ``R`` a request class was declared with, as given (a type or a string); ``Any`` when none."""
    for cls in message.__mro__:
        meta = getattr(cls, "__pydantic_generic_metadata__", None)
        if meta and meta["origin"] is Request and meta["args"]:
            return meta["args"][0]
    return Any


@dataclass(frozen=True)
class FromCaller:
    """Marks an argument that, left out (None), takes the caller's value: ``FromCaller("agent_id")`` or
    ``FromCaller("user_id")`` of the call context. Used in ``Annotated[...]`` argument types. ``acting``: the
    argument names the agent acting, which is also the reader of the request's filter and its actor."""

    attribute: str
    acting: bool = False


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
    """The single declaration of a tool, from which its MCP tool, CLI command ``m3 <domain> <name>``, ``m3_call``
    route, HTTP route and docs derive. A tool that sends one request to one actor names both (``message``,
    ``actor``) and has no handler: the gateway builds the request from the arguments (:mod:`m3.gateway.registry`)
    and answers with the actor's reply."""

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
    #: The request the gateway sends for this tool; its reply type must be ``result``. None: a handler runs it.
    message: type[Request[Any]] | None = None
    #: The actor the request goes to, one of :data:`ACTORS`.
    actor: str = ""
    #: For a tool that shows stored rows: the ``("memory" | "chat", id)`` pairs its result shows, which the
    #: gateway records in the read audit (docs/governance.md).
    audit: Callable[[Any], Iterable[tuple[str, str]]] | None = None

    @property
    def summary(self) -> str:
        """The first sentence of the description (a period followed by a capital ends it, so "e.g. 'x'" does not)."""
        return re.split(r"(?<=\.)\s+(?=[A-Z])", self.description.strip(), maxsplit=1)[0]

    @property
    def short_name(self) -> str:
        """The CLI alias without the domain prefix: ``memory_write`` -> ``write``."""
        return self.name.removeprefix(self.domain + "_")
