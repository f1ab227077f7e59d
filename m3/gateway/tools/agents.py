"""Handlers of the agent tools, and ``acting``: the agent a coordination call acts as."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from m3.errors import InvalidArgument
from m3.gateway.registry import Handler
from m3.gateway.tools.memory import owner
from m3.protocols.messages.coordination import AgentHeartbeat, AgentOffline, GetAgent, ListAgents, RegisterAgent
from m3.protocols.tools import agents as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


def acting(ctx: CallContext, agent_id: str | None) -> str:
    """``agent_id`` or the caller's agent (a token-bound caller may only name itself); one is required."""
    agent = owner(ctx, agent_id)
    if not agent:
        raise InvalidArgument("this call needs an agent: none was given and the caller has no identity",
                              hint="Pass agent_id, or set identity.agent_id (M3_IDENTITY_AGENT_ID).")
    return agent


def _record(row: dict[str, Any], status: str) -> dict[str, Any]:
    """An agent row as returned by the Writer, with the status it has right after that change."""
    return {**{k: row[k] for k in p.AgentRecord.model_fields if k != "status"}, "status": status}


async def agent_register(svc: Service, a: p.AgentRegisterArgs, ctx: CallContext) -> p.AgentRegisterResult:
    row, created = await svc.ask(svc.system.writer, RegisterAgent(
        agent_id=acting(ctx, a.agent_id), role=a.role, description=a.description, metadata=a.metadata))
    return p.AgentRegisterResult(**_record(row, "active"), created=created)


async def agent_heartbeat(svc: Service, a: p.AgentHeartbeatArgs, ctx: CallContext) -> p.AgentRecord:
    row = await svc.ask(svc.system.writer, AgentHeartbeat(agent_id=acting(ctx, a.agent_id)))
    return p.AgentRecord(**_record(row, "active"))


async def agent_offline(svc: Service, a: p.AgentOfflineArgs, ctx: CallContext) -> p.AgentRecord:
    row = await svc.ask(svc.system.writer, AgentOffline(agent_id=acting(ctx, a.agent_id)))
    return p.AgentRecord(**_record(row, "offline"))


async def agent_list(svc: Service, a: p.AgentListArgs, ctx: CallContext) -> p.AgentListResult:
    found = await svc.ask(svc.system.directory, ListAgents(status=a.status, role=a.role))
    return p.AgentListResult(count=len(found), agents=[p.AgentRecord(**row) for row in found])


async def agent_get(svc: Service, a: p.AgentGetArgs, ctx: CallContext) -> p.AgentDetails:
    return p.AgentDetails(**await svc.ask(svc.system.directory, GetAgent(agent_id=a.id)))


HANDLERS: dict[str, Handler] = {
    "agent_register": agent_register, "agent_heartbeat": agent_heartbeat, "agent_list": agent_list,
    "agent_get": agent_get, "agent_offline": agent_offline,
}
