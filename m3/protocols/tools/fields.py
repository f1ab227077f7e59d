"""Shared field types with validation that reports m3's own error codes.

Validators raise :class:`pydantic_core.PydanticCustomError` whose type is an
m3 error code (``unknown_memory_type``, ``invalid_time`` …); the gateway
turns the first such error into the matching :class:`m3.errors.M3Error`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError

from m3.errors import ContentTooLarge
from m3.protocols.base import FromCaller

MEMORY_TYPES: tuple[str, ...] = (
    "fact", "decision", "preference", "note", "observation", "event", "conversation",
    "summary", "procedure", "plan", "code", "reference", "knowledge", "config", "task",
)
RELATION_TYPES: tuple[str, ...] = (
    "related", "supersedes", "contradicts", "handoff", "derived_from", "references", "part_of",
)
Scope = Literal["agent", "user", "org"]
ChatRole = Literal["user", "assistant", "system", "tool"]


def _check_memory_type(value: str) -> str:
    if value not in MEMORY_TYPES:
        raise PydanticCustomError(
            "unknown_memory_type", "unknown memory type {value}", {"value": value, "allowed": list(MEMORY_TYPES)}
        )
    return value


def _check_relation_type(value: str) -> str:
    if value not in RELATION_TYPES:
        raise PydanticCustomError(
            "invalid_argument", "unknown relationship type {value}",
            {"value": value, "allowed": list(RELATION_TYPES)},
        )
    return value


def _check_text(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("invalid_argument", "must contain some non-blank text")
    return value


def _check_size(value: str, info: ValidationInfo) -> str:
    """Refuse content above ``max_content_chars`` of the validation context (``limits.max_content_chars``)."""
    limit = (info.context or {}).get("max_content_chars")
    if limit is not None and len(value) > limit:
        # Raised as is (not a ValueError): pydantic lets it through with its own code and details.
        raise ContentTooLarge(f"content has {len(value)} characters; the limit is {limit}",
                              details={"length": len(value), "limit": limit})
    return value


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
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def format_time(dt: datetime) -> str:
    """The wire form of a time: ISO-8601, UTC, microseconds, ``Z`` suffix."""
    # isoformat zero-pads the year (strftime's %Y does not below 1000).
    return dt.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


MemoryType = Annotated[
    str, AfterValidator(_check_memory_type), WithJsonSchema({"type": "string", "enum": list(MEMORY_TYPES)})
]
RelationType = Annotated[
    str, AfterValidator(_check_relation_type), WithJsonSchema({"type": "string", "enum": list(RELATION_TYPES)})
]
Text = Annotated[str, Field(min_length=1), AfterValidator(_check_text)]
Timestamp = Annotated[
    datetime,
    BeforeValidator(parse_time),
    PlainSerializer(format_time, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
#: Stored text (memory, chat message): non-blank and within ``limits.max_content_chars``.
Content = Annotated[Text, AfterValidator(_check_size)]
Importance = Annotated[float, Field(ge=0.0, le=1.0)]
MemoryId = Annotated[
    str, Field(min_length=8, max_length=64, description="Full id or a unique prefix of 8+ characters.")
]
Identifier = Annotated[str, Field(min_length=1, max_length=200)]
#: An owner agent: left out, the calling agent (see FromCaller).
CallerAgent = Annotated[Identifier | None, FromCaller("agent_id")]
#: A user: left out, the calling user.
CallerUser = Annotated[Identifier | None, FromCaller("user_id")]
