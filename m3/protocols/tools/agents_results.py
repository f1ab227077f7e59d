"""Results of the ``agent`` domain tools: what the Writer and the Directory answer, as the caller gets it.

Apart from :mod:`m3.protocols.tools.agents` (the arguments and declarations) because the actor
requests in :mod:`m3.protocols.messages.coordination` name these as their replies.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from m3.protocols.base import ToolResult
from m3.protocols.tools.fields import Timestamp

AgentStatus = Literal["active", "idle", "offline"]


class AgentRecord(ToolResult):
    id: str
    role: str | None
    description: str | None
    metadata: dict[str, Any]
    registered_at: Timestamp
    last_seen_at: Timestamp = Field(description="The last registration or heartbeat.")
    offline_at: Timestamp | None = Field(description="Set by agent_offline; cleared by the next heartbeat.")
    status: AgentStatus = Field(description="active, idle or offline, from the age of the last heartbeat.")


class AgentRegisterResult(AgentRecord):
    created: bool = Field(description="False when the agent was registered already (its fields were refreshed).")


class AgentListResult(ToolResult):
    count: int
    agents: list[AgentRecord]


class AgentDetails(AgentRecord):
    unread_handoffs: int
    unacked_notifications: int
