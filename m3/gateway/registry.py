"""The tool registry: every :class:`~m3.protocols.base.ToolSpec`, run by a handler or by the generic route.

Most tools validate their arguments, send one request to one actor and return its reply (the spec's
result model, as it is): their spec names the request (``message``) and the actor (``actor``), and no
handler is written. The generic route builds the request from the validated arguments:

* an argument (or computed field of the arguments) goes to the request field of the same name;
* an argument named ``agent_id``, or naming the agent acting (notify's ``from_agent``), must be the caller
  itself when a token binds the caller to an agent (:func:`owner`, else ``forbidden``);
* an argument annotated ``FromCaller("agent_id")`` / ``FromCaller("user_id")`` that is None takes the
  caller's agent / user (a write defaults to its author; a read narrows to the caller only when asked);
  if the request requires it and the caller has none either, the call fails with ``invalid_argument``;
* the *reader* is the agent acting (an argument marked ``FromCaller("agent_id", acting=True)``) if the
  request takes one, else the calling agent;
* ``filter``, when the request has one, is the reader's read filter: isolation
  as configured (``isolation.enforce``), plus every argument named like a :class:`MemoryFilter` field
  that the request does not take itself (``type``, ``agent_id``, ``as_of`` …);
* ``actor``, when the request has one, is the reader (history records it);
* an argument the request does not name is only validated (``confirm``).

Tools that orchestrate (several asks, the registry itself, the surface) keep a handler in
``m3.gateway.tools``, keyed by its function's name. The registry refuses a spec with
neither a request nor a handler (or both), a handler without a spec, and a request the arguments cannot
build or whose reply type is not the result: the surfaces derived from it (MCP, CLI, m3_call, HTTP,
docs) always agree.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic.json_schema import GenerateJsonSchema

from m3.errors import Forbidden, InvalidArgument, UnknownDomain, UnknownTool
from m3.protocols.base import ACTORS, FromCaller, Request, ToolArgs, ToolResult, ToolSpec, reply_type
from m3.protocols.messages.memory import MemoryFilter
from m3.protocols.renames import RENAMES, Renames

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service

Handler = Callable[["Service", Any, "CallContext"], Awaitable[ToolResult]]

#: Request fields the generic route fills from the call context rather than from an argument.
CONTEXT_FIELDS = ("filter", "actor")
_FILTER_FIELDS = frozenset(MemoryFilter.model_fields) - {"reader_agent_id", "enforce_isolation"}
log = logging.getLogger(__name__)


def owner(ctx: CallContext, agent_id: str | None) -> str | None:
    """The agent a call acts as (``agent_id`` or the caller); a token-bound caller may only name itself.

    Every ``agent_id`` argument of every tool goes through here, reads included, so that an agent
    cannot write or read as another through a token.
    """
    if agent_id is not None and ctx.bound and agent_id != ctx.agent_id:
        raise Forbidden(f"this caller acts as agent {ctx.agent_id!r} and cannot act as {agent_id!r}",
                        details={"agent_id": ctx.agent_id})
    return agent_id if agent_id is not None else ctx.agent_id


def acting(ctx: CallContext, agent_id: str | None) -> str:
    """``agent_id`` or the caller's agent (see :func:`owner`); one is required."""
    agent = owner(ctx, agent_id)
    if not agent:
        raise needs_caller("agent_id")
    return agent


class _UntitledFields(GenerateJsonSchema):
    """JSON Schema without the title pydantic derives from each field's name ("Content Hash" for content_hash):
    it repeats the property's name, and every tools/list pays for it in the model's context."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    handler: Handler | None = None

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments, computed once."""
        return self.spec.args.model_json_schema(schema_generator=_UntitledFields)

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        return self.spec.result.model_json_schema(mode="serialization", schema_generator=_UntitledFields)

    @cached_property
    def _from_caller(self) -> dict[str, FromCaller]:
        """Argument name -> its :class:`FromCaller` mark."""
        return {name: meta for name, info in self.spec.args.model_fields.items()
                for meta in info.metadata if isinstance(meta, FromCaller)}

    def request(self, args: ToolArgs, ctx: CallContext, *, enforce_isolation: bool) -> Request[Any]:
        """The request of the generic route for validated ``args`` (see the module docstring)."""
        assert self.spec.message is not None
        wanted = self.spec.message.model_fields
        values: dict[str, Any] = {}
        narrowing: dict[str, Any] = {}
        reader = ctx.agent_id
        for name in [*type(args).model_fields, *type(args).model_computed_fields]:
            value = getattr(args, name)
            mark = self._from_caller.get(name)
            if name == "agent_id" or (mark is not None and mark.acting):
                owner(ctx, value)  # a token-bound caller names no other agent
            if value is None and mark is not None:
                value = getattr(ctx, mark.attribute)
            if name in wanted:
                if value is None and mark is not None and wanted[name].is_required():
                    raise needs_caller(mark.attribute)
                values[name] = value
                if mark is not None and mark.acting:
                    reader = value
            elif name in _FILTER_FIELDS:
                narrowing[name] = value
        if "filter" in wanted:  # (an argument named filter, e.g. task_claim's, is another thing)
            values["filter"] = MemoryFilter(reader_agent_id=reader, enforce_isolation=enforce_isolation, **narrowing)
        if "actor" in wanted and "actor" not in values:
            values["actor"] = reader
        return self.spec.message(**values)


def needs_caller(attribute: str) -> InvalidArgument:
    """A request needs the caller's agent (or user), but none was given and the caller has none."""
    noun = attribute.removesuffix("_id")
    return InvalidArgument(f"this call needs {'an' if noun[0] in 'aeiou' else 'a'} {noun}: none was given and the "
                           "caller has no identity",
                           hint=f"Pass {attribute}, or set identity.{attribute} (M3_IDENTITY_{attribute.upper()}).")


def check_route(spec: ToolSpec) -> None:
    """Refuse a spec whose request cannot be built from its arguments or whose reply is not its result."""
    message = spec.message
    assert message is not None
    if spec.actor not in ACTORS:
        raise ValueError(f"{spec.name}: actor {spec.actor!r} is not one of {ACTORS}")
    reply = reply_type(message)
    if reply is not spec.result and not (isinstance(reply, str) and reply.split(".")[-1] == spec.result.__name__):
        raise ValueError(f"{spec.name}: {message.__name__} replies {reply!r}, not {spec.result.__name__}")
    given = {*spec.args.model_fields, *spec.args.model_computed_fields, *CONTEXT_FIELDS}
    unfilled = sorted(n for n, f in message.model_fields.items() if f.is_required() and n not in given)
    if unfilled:
        raise ValueError(f"{spec.name}: no argument gives {message.__name__}.{', '.join(unfilled)}")


class Registry:
    def __init__(self, specs: Iterable[ToolSpec], handlers: Mapping[str, Handler], renames: Renames = RENAMES):
        specs = list(specs)
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError("duplicate tool names in the registry")
        routed = {s.name for s in specs if s.message is not None}
        missing = sorted(set(names) - set(handlers) - routed)
        orphans = sorted(set(handlers) - set(names))
        if missing or orphans:
            raise ValueError(f"tools without handlers: {missing}; handlers without specs: {orphans}")
        both = sorted(routed & set(handlers))
        if both:
            raise ValueError(f"tools with both a request and a handler: {both}")
        for spec in specs:
            if spec.message is not None:
                check_route(spec)
        self._tools = {s.name: Tool(s, handlers.get(s.name)) for s in specs}
        check_renames(renames, self._tools)
        self.renames = renames
        self._warned: set[tuple[str, ...]] = set()

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def get(self, name: str) -> Tool:
        """The tool named ``name``, or renamed from it (with a warning, once per process and name)."""
        if name in self.renames.tools:
            new = self.renames.tools[name]
            self._warn(("tool", name), f"tool {name} was renamed {new}: call it by the new name")
            name = new
        tool = self._tools.get(name)
        if tool is None:
            close = difflib.get_close_matches(name, list(self._tools), n=3, cutoff=0.5)
            hint = f"Did you mean {', '.join(close)}?" if close else "Call m3_index to list every tool."
            raise UnknownTool(f"no tool named {name!r}", hint=hint, details={"did_you_mean": close})
        return tool

    def upgrade_args(self, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
        """``args`` with the tool's renamed arguments under their new names (a warning each); giving an old and
        its new name together is ``invalid_argument``."""
        renamed = self.renames.args.get(tool.spec.name, {})
        if not renamed or not isinstance(args, dict) or not renamed.keys() & args.keys():
            return args
        upgraded = dict(args)
        for old, new in renamed.items():
            if old not in upgraded:
                continue
            if new in upgraded:
                raise InvalidArgument(f"{tool.spec.name}: {old} was renamed {new}; give only {new}",
                                      details={"renamed": {old: new}})
            upgraded[new] = upgraded.pop(old)
            self._warn(("argument", tool.spec.name, old), f"{tool.spec.name}: argument {old} was renamed {new}: "
                       "use the new name")
        return upgraded

    def _warn(self, key: tuple[str, ...], message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", message)

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


def check_renames(renames: Renames, tools: Mapping[str, Tool]) -> None:
    """Refuse a rename table that points at no tool or argument, or whose old name is still in use."""
    for old, new in renames.tools.items():
        if new not in tools or old in tools:
            raise ValueError(f"tool rename {old} → {new}: the new name must be a tool and the old one not")
    for name, renamed in renames.args.items():
        fields = tools[name].spec.args.model_fields if name in tools else {}
        for old, new in renamed.items():
            if new not in fields or old in fields:
                raise ValueError(f"argument rename {name}.{old} → {new}: the new name must be an argument of "
                                 "the tool (by its new name) and the old one not")


def default_registry() -> Registry:
    """Every tool m3 ships, with the handlers of those that orchestrate."""
    from m3.gateway.tools import HANDLERS
    from m3.protocols.tools import ALL_TOOLS

    return Registry(ALL_TOOLS, HANDLERS)
