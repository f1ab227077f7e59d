"""agent_whoami (the agent domain): who the caller is to m3, and what that lets it see."""

from __future__ import annotations

from pydantic import Field

from m3.protocols.base import ToolResult, ToolSpec
from m3.protocols.tools.agents import AgentDetails
from m3.protocols.tools.meta import NoArgs


class AgentWhoamiResult(ToolResult):
    agent_id: str | None = Field(description="The agent this caller acts as; null when it has no identity.")
    user_id: str | None = Field(description="The user this caller writes for by default.")
    bound: bool = Field(description="True when a bearer token fixes the agent: the caller cannot act as another.")
    isolation: bool = Field(description="True when scope=agent memories are private to their agent.")
    registered: AgentDetails | None = Field(description="Its agent record (agent_register), or null.")


AGENT_WHOAMI = ToolSpec(
    name="agent_whoami", domain="agent", args=NoArgs, result=AgentWhoamiResult, read_only=True,
    description=(
        "Find out which agent and user you act as in m3, whether a token binds you to that agent, whether "
        "your scope=agent memories are private, and your registration with its unread handoffs and "
        "notifications. Use it at the start of a session before writing, handing off or claiming tasks."
    ),
)
