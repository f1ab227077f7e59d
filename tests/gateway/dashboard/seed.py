"""A small store for the dashboard and wiki tests: shared memories, a link, a version, a conflict, an agent with a
handoff in its inbox, a task tree, entities; written through the tools as other agents would."""

from __future__ import annotations

from typing import Any

import trio

from m3.gateway.service import CallContext, Service

A = CallContext(agent_id="agent-a")
B = CallContext(agent_id="agent-b")


async def seed(service: Service) -> dict[str, Any]:
    """Write the fixture data; the ids of what the tests look for."""
    call = service.call
    await call("agent_register", {"agent_id": "agent-b", "role": "reviewer", "description": "reads the orders"}, B)
    order_a = await call("memory_write", {"content": "Customer 4411 ordered 3 laptops from Alice Smith.",
                                          "type": "fact", "scope": "user", "user_id": "alice",
                                          "title": "Order 4411"}, A)
    order_b = await call("memory_write", {"content": "Customer 4412 ordered 3 laptops from Alice Smith.",
                                          "type": "fact", "scope": "user", "user_id": "alice",
                                          "title": "Order 4412"}, A)
    decision = await call("memory_write", {"content": "We deploy on Fridays only after the review by Bob Jones.",
                                           "type": "decision", "scope": "org", "title": "Deploy rule",
                                           "conversation_id": "conv-1", "metadata": {"tags": ["deploy"]}}, A)
    await trio.to_thread.run_sync(service.system.wait_embedded)
    await call("memory_link", {"from_id": decision["id"], "to_id": order_a["id"], "type": "related"}, A)
    await call("memory_update", {"id": decision["id"], "content": "We deploy on Fridays only after the review by "
                                 "Bob Jones and Alice Smith.", "reason": "two reviewers"}, A)
    await call("memory_handoff", {"to_agent": "agent-b", "task": "check the laptop orders",
                                  "context_ids": [order_a["id"]]}, A)
    root = await call("task_create", {"title": "Ship the laptops"}, A)
    await call("task_create", {"title": "Pack the laptops", "parent_id": root["id"]}, A)
    await call("task_claim", {"agent_id": "agent-b", "lease": 600}, B)
    await call("entity_extract", {}, A)
    conflicts = await call("conflicts_list", {}, CallContext(agent_id="dashboard"))
    return {"order_a": order_a["id"], "order_b": order_b["id"], "decision": decision["id"], "task": root["id"],
            "conflict": conflicts["items"][0]["id"] if conflicts["items"] else None}
