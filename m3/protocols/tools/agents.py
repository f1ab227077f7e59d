"""Arguments, results and declarations of the ``agent`` domain tools.

``agent_id`` in a tool always means "the agent acting"; it defaults to the
caller, and through a bearer token it can only be the token's own agent.
Tools that name another agent call the argument by its role (``id``,
``to_agent``, ``assignee``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from m3.protocols.base import FromCaller, ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import coordination as msg
from m3.protocols.tools.fields import Identifier, JsonObject, Timestamp

AgentStatus = Literal["active", "idle", "offline"]
ACTING_AGENT = "The agent acting; defaults to the caller (through a token: only the token's agent)."
#: An ``agent_id`` argument: the agent acting, the caller's when left out.
ActingAgent = Annotated[Identifier | None, FromCaller("agent_id", acting=True),
                        Field(description=ACTING_AGENT)]


class AgentRecord(ToolResult):
    id: str
    role: str | None
    description: str | None
    metadata: dict[str, Any]
    registered_at: Timestamp
    last_seen_at: Timestamp = Field(description="The last registration or heartbeat.")
    offline_at: Timestamp | None = Field(description="Set by agent_offline; cleared by the next heartbeat.")
    status: AgentStatus = Field(description="active, idle or offline, from the age of the last heartbeat.")


class AgentRegisterArgs(ToolArgs):
    agent_id: ActingAgent = None
    role: str | None = Field(None, max_length=200, description="What this agent does, e.g. 'reviewer', 'worker'.")
    description: str | None = Field(None, max_length=4000, description="A sentence or two for the other agents.")
    metadata: JsonObject | None = Field(None, description="Any JSON object, e.g. the model or host it runs on.")


class AgentRegisterResult(AgentRecord):
    created: bool = Field(description="False when the agent was registered already (its fields were refreshed).")


AGENT_REGISTER = ToolSpec(
    name="agent_register", domain="agent", args=AgentRegisterArgs, result=AgentRegisterResult,
    message=msg.RegisterAgent, actor="writer",
    description=(
        "Announce this agent to the others that share the store, with its role and what it does. Call it once "
        "when a session starts; calling again is harmless and refreshes the role, description and heartbeat. "
        "Only registered agents can receive handoffs, notifications and task assignments."
    ),
)


class ActingAgentArgs(ToolArgs):
    """Arguments of a tool about the acting agent only (heartbeat, offline, notifications_ack_all)."""

    agent_id: ActingAgent = None


AGENT_HEARTBEAT = ToolSpec(
    name="agent_heartbeat", domain="agent", args=ActingAgentArgs, result=AgentRecord,
    message=msg.AgentHeartbeat, actor="writer",
    description=(
        "Tell the other agents this one is still at work. Call it every minute or so during long work: an agent "
        "counts as active while its last heartbeat is recent, then idle, then offline "
        "(agents.active_window_s, agents.offline_after_s). It does not renew task leases; task_heartbeat does."
    ),
)


class AgentListArgs(ToolArgs):
    status: AgentStatus | None = Field(None, description="Only agents with this status.")
    role: str | None = Field(None, max_length=200, description="Only agents with this role.")


class AgentListResult(ToolResult):
    count: int
    agents: list[AgentRecord]


AGENT_LIST = ToolSpec(
    name="agent_list", domain="agent", args=AgentListArgs, result=AgentListResult, read_only=True,
    message=msg.ListAgents, actor="directory",
    description=(
        "List the agents that share this store, with their role and status (active, idle, offline). Use it to "
        "decide whom to hand work to (memory_handoff) or assign a task to (task_assign)."
    ),
)


class AgentGetArgs(ToolArgs):
    id: Identifier = Field(description="The agent to look up.")


class AgentDetails(AgentRecord):
    unread_handoffs: int
    unacked_notifications: int


AGENT_GET = ToolSpec(
    name="agent_get", domain="agent", args=AgentGetArgs, result=AgentDetails, read_only=True,
    message=msg.GetAgent, actor="directory",
    description=(
        "Read one agent's record: role, description, last heartbeat, status, and how many handoffs and "
        "notifications it has not read yet (a busy agent may be the wrong one to hand more work to)."
    ),
)


AGENT_OFFLINE = ToolSpec(
    name="agent_offline", domain="agent", args=ActingAgentArgs, result=AgentRecord,
    message=msg.AgentOffline, actor="writer",
    description=(
        "Mark this agent offline at once, e.g. when its session ends, so that others stop handing it work. "
        "Its handoffs and notifications wait in its inbox; its next heartbeat or registration brings it back."
    ),
)

AGENT_TOOLS: tuple[ToolSpec, ...] = (AGENT_REGISTER, AGENT_HEARTBEAT, AGENT_LIST, AGENT_GET, AGENT_OFFLINE)
