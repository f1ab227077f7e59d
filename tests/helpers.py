"""Helpers shared by tests."""

from __future__ import annotations

from typing import Any

import trio

from m3.gateway.service import CallContext, Service


def call(service: Service, tool: str, ctx: CallContext | None = None, **args: Any) -> dict[str, Any]:
    """Run one tool through the service from synchronous test code."""
    context = ctx or CallContext(agent_id=service.config["identity.agent_id"])
    result: dict[str, Any] = trio.run(service.call, tool, args, context)
    return result
