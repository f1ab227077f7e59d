"""The service every surface calls: validate arguments, run the tool, translate errors.

MCP, the CLI, ``m3_call`` and HTTP all go through :meth:`Service.call`, so
validation and error translation happen once, here. Whatever goes wrong
leaves as an :class:`~m3.errors.M3Error`; surfaces only render it.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from m3.actors import bridge
from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.config import Config
from m3.errors import ContentTooLarge, FieldTooLarge, InvalidArgument, InvalidTime, M3Error, UnknownMemoryType
from m3.gateway.registry import Registry, Tool
from m3.protocols.base import Request, ToolResult
from m3.protocols.messages.governance import RecordReads
from m3.protocols.tools.fields import LIMIT_KEYS

log = logging.getLogger(__name__)
R = TypeVar("R")

_CODED_VALIDATION: dict[str, type[M3Error]] = {
    "unknown_memory_type": UnknownMemoryType,
    "invalid_time": InvalidTime,
    "content_too_large": ContentTooLarge,
    "field_too_large": FieldTooLarge,
    # pydantic's own codes for a field's declared max_length: a size limit like the configured ones.
    "string_too_long": FieldTooLarge,
    "too_long": FieldTooLarge,
}


@dataclass(frozen=True)
class CallContext:
    """Who is calling; ``bound`` when a bearer token gives the identity (naming another agent is refused)."""

    agent_id: str | None
    user_id: str | None = None
    bound: bool = False
    #: Set by the MCP surface: registers a domain's tools in the session and notifies the client.
    load_domain: Callable[[str], Awaitable[list[str]]] | None = field(default=None, compare=False)


class Service:
    def __init__(self, config: Config, system: ActorSystem, registry: Registry):
        self.config = config
        self.system = system
        self.registry = registry
        self.timeout: float = config["actors.ask_timeout_s"]
        self.limits = limits_of(config)
        self.audit_reads: bool = config["audit.enabled"]
        #: When this service started (admin_engine_status in embedded mode).
        self.started = time.time()
        #: The engine's own status when an engine process serves this service (set by the engine), else None.
        self.engine_status: Callable[[], dict[str, Any]] | None = None
        self.calls = CallLog()

    async def call(self, name: str, raw_args: dict[str, Any] | None, ctx: CallContext) -> dict[str, Any]:
        """Run tool ``name`` with JSON arguments; return its JSON result. Raises M3Error only."""
        tool = self.registry.get(name)
        args = validate_args(tool, self.registry.upgrade_args(tool, raw_args or {}), self.limits)
        begun, outcome = time.perf_counter(), "ok"
        try:
            result = await self.run(tool, args, ctx)
        except M3Error as exc:
            outcome = exc.code
            raise
        except Exception as exc:
            outcome = "internal_error"
            log.exception("tool %s failed", name)
            raise M3Error(f"{name} failed unexpectedly: {type(exc).__name__}") from exc
        finally:
            self.calls.record(tool.spec.name, time.perf_counter() - begun, outcome)
        return result.model_dump(mode="json")

    async def run(self, tool: Tool, args: Any, ctx: CallContext) -> ToolResult:
        """The tool's handler, or the generic route: its request to its actor, whose reply is the result."""
        if tool.handler is not None:
            result = await tool.handler(self, args, ctx)
        else:
            request = tool.request(args, ctx, enforce_isolation=self.config["isolation.enforce"])
            result = await self.ask(getattr(self.system, tool.spec.actor), request)
        self._audit(tool, result, ctx)
        return result

    def _audit(self, tool: Tool, result: ToolResult, ctx: CallContext) -> None:
        """Tell the AuditKeeper which rows the result showed to the caller (the read audit; nobody waits for it)."""
        if tool.spec.audit is None or not self.audit_reads:
            return
        refs = tuple(tool.spec.audit(result))
        if refs:
            self.system.audit_keeper.tell(RecordReads(reader=ctx.agent_id, tool=tool.spec.name, at=datetime.now(UTC),
                                                refs=refs))

    async def ask(self, handle: ActorHandle, message: Request[R]) -> R:
        """Ask one actor under the configured timeout."""
        return await bridge.ask(handle, message, self.timeout)


@dataclass(frozen=True)
class CallRecord:
    """One finished tool call: which tool, how long, when, and its outcome (``ok`` or an error code) — never its
    arguments or result."""

    tool: str
    ms: float
    at: datetime
    outcome: str


class CallLog:
    """The last :data:`CALLS_KEPT` tool calls of this process (diagnostics_slow_calls); one append per call."""

    def __init__(self, kept: int = 0) -> None:
        self._calls: deque[CallRecord] = deque(maxlen=kept or CALLS_KEPT)

    def record(self, tool: str, seconds: float, outcome: str) -> None:
        self._calls.append(CallRecord(tool, round(seconds * 1000, 3), datetime.now(UTC), outcome))

    def slowest(self, n: int, tool: str | None = None) -> tuple[int, list[CallRecord]]:
        """How many calls are kept, and the ``n`` slowest of them (of ``tool`` only, when given)."""
        calls = [c for c in list(self._calls) if tool is None or c.tool == tool]
        return len(calls), sorted(calls, key=lambda c: c.ms, reverse=True)[:n]


#: How many recent calls a service remembers for diagnostics_slow_calls.
CALLS_KEPT = 1000


def limits_of(config: Config) -> dict[str, Any]:
    """The validation context of arguments: the configured ``limits.*`` (see m3.protocols.tools.fields.Content)."""
    return {key: config[key] for key in LIMIT_KEYS}


def validate_args(tool: Tool, raw: dict[str, Any], limits: dict[str, Any]) -> Any:
    """Build the tool's argument model under ``limits`` (:func:`limits_of`); pydantic errors become coded M3 errors."""
    if not isinstance(raw, dict):
        raise InvalidArgument(f"{tool.spec.name} arguments must be a JSON object")
    try:
        return tool.spec.args.model_validate(raw, context=limits)
    except ValidationError as exc:
        raise translate_validation(tool.spec.name, exc) from None


def translate_validation(tool_name: str, exc: ValidationError) -> M3Error:
    problems = [{"field": _where(e), "problem": e["msg"]} for e in exc.errors(include_url=False, include_input=False)]
    first = exc.errors(include_url=False)[0]
    cls = _CODED_VALIDATION.get(first["type"], InvalidArgument)
    details: dict[str, Any] = {"errors": problems}
    ctx = first.get("ctx") or {}
    if "allowed" in ctx:
        details["allowed"] = ctx["allowed"]
    hint = None
    if cls in (FieldTooLarge, ContentTooLarge):
        details.update(_size_details(first, ctx))
        if "setting" not in details:
            hint = "Shorten the field named in details.field to details.limit (details.unit) or less."
    summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems[:5])
    return cls(f"invalid arguments for {tool_name}: {summary}", hint=hint, details=details)


def _where(error: Any) -> str:
    """The field an error is about: its location, or (for checks over all arguments) the path it names."""
    located = ".".join(str(p) for p in error["loc"])
    return located or str((error.get("ctx") or {}).get("field") or "(arguments)")


def _size_details(error: Any, ctx: dict[str, Any]) -> dict[str, Any]:
    """``{field, size, limit, unit}`` of a value over its limit (configured ones also name their setting)."""
    field_name = _where(error)
    if "limit" in ctx:
        return {"field": field_name, "size": ctx["size"], "limit": ctx["limit"], "unit": ctx["unit"],
                "setting": ctx["setting"]}
    value = error.get("input")
    unit = "characters" if isinstance(value, str) else "items"
    size = len(value) if isinstance(value, str | list | tuple | dict) else None
    return {"field": field_name, "size": size, "limit": ctx.get("max_length"), "unit": unit}
