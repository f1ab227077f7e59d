"""``acting``: the agent a coordination call acts as.

The agent tools themselves are declarations (``m3.protocols.tools.agents``): the Writer and the
Directory answer them with their results, so they have no handler here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.gateway.registry import needs_caller, owner

if TYPE_CHECKING:
    from m3.gateway.service import CallContext


def acting(ctx: CallContext, agent_id: str | None) -> str:
    """``agent_id`` or the caller's agent (a token-bound caller may only name itself); one is required."""
    agent = owner(ctx, agent_id)
    if not agent:
        raise needs_caller("agent_id")
    return agent

