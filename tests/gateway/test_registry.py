"""The registry refuses declarations that could not run, and the generic route builds requests by convention."""

from __future__ import annotations

from dataclasses import replace

import pytest

from m3.actors.router import RouterRegistry
from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.errors import Forbidden
from m3.gateway.registry import Registry, default_registry
from m3.gateway.service import CallContext
from m3.gateway.tools.meta import embedder_status
from m3.protocols.base import ACTORS, reply_type
from m3.protocols.messages.memory import GetHistory, GetMemory
from m3.protocols.tools import chatlog as c
from m3.protocols.tools import memory as p

GET = p.MEMORY_GET


def test_a_spec_with_neither_a_request_nor_a_handler_is_refused() -> None:
    with pytest.raises(ValueError, match="tools without handlers: \\['memory_get'\\]"):
        Registry([replace(GET, message=None)], {})


def test_a_handler_without_a_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="handlers without specs: \\['embedder_status'\\]"):
        Registry([GET], {"embedder_status": embedder_status})


def test_a_spec_with_both_a_request_and_a_handler_is_refused() -> None:
    with pytest.raises(ValueError, match="both a request and a handler"):
        Registry([replace(GET, name="embedder_status")], {"embedder_status": embedder_status})


@pytest.mark.parametrize(("change", "problem"), [
    ({"actor": "librarian"}, "actor 'librarian' is not one of"),
    ({"message": GetHistory}, "GetHistory replies .*MemoryHistoryResult.*, not MemoryRecord"),
    ({"args": c.ChatlogSearchArgs}, "no argument gives GetMemory.id"),
])
def test_a_request_that_cannot_be_built_or_replies_another_type_is_refused(change: dict[str, object],
                                                                            problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Registry([replace(GET, **change)], {})  # type: ignore[arg-type]


def test_a_request_names_its_reply_type_and_every_routed_spec_names_a_started_actor(system: ActorSystem) -> None:
    assert reply_type(GetMemory) == "memory.MemoryRecord"  # named in a string: tools.memory imports GetMemory
    routed = {t.spec.actor for t in default_registry() if t.spec.message is not None}
    assert routed <= set(ACTORS)
    assert all(isinstance(getattr(system, name), ActorHandle | RouterRegistry) for name in ACTORS)


def test_the_generic_route_fills_the_filter_and_refuses_a_bound_caller_naming_another_agent() -> None:
    tool = Registry([GET], {}).get("memory_get")
    request = tool.request(p.MemoryGetArgs(id="abcdef12"), CallContext(agent_id="ann", bound=True),
                           enforce_isolation=True)
    assert isinstance(request, GetMemory)
    assert (request.id, request.filter.reader_agent_id, request.filter.enforce_isolation) == ("abcdef12", "ann", True)
    with pytest.raises(Forbidden):
        Registry([replace(GET, args=_WithAgent)], {}).get("memory_get").request(
            _WithAgent(id="abcdef12", agent_id="bob"), CallContext(agent_id="ann", bound=True),
            enforce_isolation=False)


class _WithAgent(p.MemoryGetArgs):
    agent_id: str | None = None
