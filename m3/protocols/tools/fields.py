"""Shared field types with validation that reports m3's own error codes.

Validators raise :class:`pydantic_core.PydanticCustomError` whose type is an
m3 error code (``unknown_memory_type``, ``invalid_time`` …); the gateway
turns the first such error into the matching :class:`m3.errors.M3Error`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError

from m3.config import setting
from m3.protocols.base import FromCaller

MEMORY_TYPES: tuple[str, ...] = (
    "fact", "decision", "preference", "note", "observation", "event", "conversation",
    "summary", "procedure", "plan", "code", "reference", "knowledge", "config", "task", "belief",
)
RELATION_TYPES: tuple[str, ...] = (
    "related", "supersedes", "contradicts", "handoff", "derived_from", "references", "part_of", "consolidates",
)
Scope = Literal["agent", "user", "org"]
ChatRole = Literal["user", "assistant", "system", "tool"]


def _one_of(allowed: tuple[str, ...], code: str, what: str) -> Any:
    """A check that refuses a value not in ``allowed`` with ``code``, listing ``allowed`` in the details."""
    def check(value: str) -> str:
        if value not in allowed:
            raise PydanticCustomError(code, f"unknown {what} {{value}}", {"value": value, "allowed": list(allowed)})
        return value
    return check


def _check_text(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("invalid_argument", "must contain some non-blank text")
    return value


#: The store keeps turns, versions and counts in 32-bit INTEGER columns (PostgreSQL); larger values are refused
#: by validation instead of failing in the database.
MAX_STORE_INT = 2**31 - 1

#: The settings that validation reads (``limits.*``, the task lease bounds); the gateway passes their configured
#: values as the validation context (``model_validate(raw, context=limits)``), and the defaults apply without one.
LIMIT_KEYS: tuple[str, ...] = (
    "limits.max_content_chars", "limits.max_text_chars", "limits.max_json_bytes", "limits.max_json_depth",
    "tasks.lease_s", "tasks.max_lease_s",
)


def limit(info: ValidationInfo | None, key: str) -> Any:
    """The configured value of ``key`` from the validation context, or its default."""
    context = info.context if info is not None else None
    if isinstance(context, Mapping) and key in context:
        return context[key]
    return setting(key).default


def too_large(code: str, field: str, size: int, limit_value: int, unit: str, key: str) -> PydanticCustomError:
    """The error for a value over its limit; ``details`` carries the size, the limit, the unit and the setting."""
    return PydanticCustomError(
        code, "{size} {unit}; the limit is {limit} ({setting})",
        {"field": field, "size": size, "limit": limit_value, "unit": unit, "setting": key},
    )


def _check_chars(key: str, code: str = "field_too_large") -> Any:
    def check(value: str, info: ValidationInfo) -> str:
        most = limit(info, key)
        if len(value) > most:
            raise too_large(code, info.field_name or "the text", len(value), most, "characters", key)
        return value
    return check


def _check_json(value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except ValueError:
        raise PydanticCustomError("invalid_argument", "JSON numbers must be finite (no NaN or Infinity)") from None
    most = limit(info, "limits.max_json_bytes")
    if len(encoded) > most:
        raise too_large("field_too_large", info.field_name or "the object", len(encoded), most, "bytes",
                        "limits.max_json_bytes")
    return value


def check_strings(data: Any, info: ValidationInfo | None) -> Any:
    """Refuse, anywhere in raw arguments, what no store keeps: NUL characters, lone UTF-16 surrogates, and
    nesting deeper than ``limits.max_json_depth``. Walks iteratively, so deep input cannot exhaust the stack."""
    most = limit(info, "limits.max_json_depth")
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            _check_storable(value, path)
        elif isinstance(value, dict | list):
            if depth > most:
                raise too_large("field_too_large", path or "the arguments", depth, most, "levels of nesting",
                                "limits.max_json_depth")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _check_storable(key, path)
                stack.append((item, f"{path}.{key}" if path else str(key), depth + 1))
    return data


def _check_storable(text: str, path: str) -> None:
    if "\x00" in text:
        raise PydanticCustomError("invalid_argument", "text may not contain NUL (U+0000) characters",
                                  {"field": path or "(arguments)"})
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError("invalid_argument", "text is not valid Unicode (it has a lone surrogate)",
                                  {"field": path or "(arguments)"}) from None


def parse_time(value: Any) -> datetime:
    """Parse an ISO-8601 string or datetime into an aware UTC datetime.

    Naive values are taken as UTC. Raises ``PydanticCustomError('invalid_time')``.
    """
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise PydanticCustomError("invalid_time", "not an ISO-8601 time: {value}", {"value": value}) from None
    else:
        raise PydanticCustomError("invalid_time", "not an ISO-8601 time: {value}", {"value": repr(value)})
    try:
        return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-12:00 is after the last representable UTC time
        raise PydanticCustomError("invalid_time", "{value} is outside the years 1 to 9999 in UTC",
                                  {"value": str(value)}) from None


def format_time(dt: datetime) -> str:
    """The wire form of a time: ISO-8601, UTC, microseconds, ``Z`` suffix."""
    # isoformat zero-pads the year (strftime's %Y does not below 1000).
    return dt.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


MemoryType = Annotated[str, AfterValidator(_one_of(MEMORY_TYPES, "unknown_memory_type", "memory type")),
                       WithJsonSchema({"type": "string", "enum": list(MEMORY_TYPES)})]
RelationType = Annotated[str, AfterValidator(_one_of(RELATION_TYPES, "invalid_argument", "relationship type")),
                         WithJsonSchema({"type": "string", "enum": list(RELATION_TYPES)})]
Text = Annotated[str, Field(min_length=1), AfterValidator(_check_text),
                 AfterValidator(_check_chars("limits.max_text_chars"))]
"""Non-blank free text of at most ``limits.max_text_chars`` characters (queries, tasks, messages)."""
Content = Annotated[str, Field(min_length=1), AfterValidator(_check_text),
                    AfterValidator(_check_chars("limits.max_content_chars", "content_too_large"))]
"""Stored content (memories, chat messages): non-blank, at most ``limits.max_content_chars`` characters."""
JsonObject = Annotated[dict[str, Any], AfterValidator(_check_json)]
"""Any JSON object of at most ``limits.max_json_bytes`` UTF-8 bytes, finite numbers only."""
Timestamp = Annotated[
    datetime,
    BeforeValidator(parse_time),
    PlainSerializer(format_time, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
AsOf = Annotated[Timestamp | None, Field(
    description="Transaction time: the store as it was at this time (what m3 knew then; time travel).")]
ValidAt = Annotated[Timestamp | None, Field(
    description="Valid time: what held in the world at this time (a fact superseded since answers for its "
                "own period), as known now or at as_of.")]
ResultCount = Annotated[int | None, Field(ge=1, le=MAX_STORE_INT, description="How many results; default 8.")]
Importance = Annotated[float, Field(ge=0.0, le=1.0)]
MemoryId = Annotated[
    str, Field(min_length=8, max_length=64, description="Full id or a unique prefix of 8+ characters.")
]
Identifier = Annotated[str, Field(min_length=1, max_length=200)]
#: An owner agent: left out, the calling agent (see FromCaller).
CallerAgent = Annotated[Identifier | None, FromCaller("agent_id")]
#: A user: left out, the calling user.
CallerUser = Annotated[Identifier | None, FromCaller("user_id")]
