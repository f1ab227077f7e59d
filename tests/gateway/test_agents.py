"""Agents: idempotent registration, status from the age of the last heartbeat, going offline."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from tests.helpers import call

ANA, BEN = CallContext(agent_id="ana"), CallContext(agent_id="ben")


def service_with(config: Config, embedder: MiniLMEmbedder, **windows: float) -> Iterator[Service]:
    configured = config.with_overrides(**windows)
    system = ActorSystem(configured, embedder).start()
    try:
        yield Service(configured, system, default_registry())
    finally:
        system.stop()


@pytest.fixture
def ageing(config: Config, embedder: MiniLMEmbedder) -> Iterator[Service]:
    """Windows of zero seconds: any heartbeat is already older than the active window."""
    yield from service_with(config, embedder, agents__active_window_s=0, agents__offline_after_s=3600)


@pytest.fixture
def gone(config: Config, embedder: MiniLMEmbedder) -> Iterator[Service]:
    yield from service_with(config, embedder, agents__active_window_s=0, agents__offline_after_s=0)


def test_registering_twice_refreshes_the_agent_and_says_it_is_not_new(service: Service) -> None:
    first = call(service, "agent_register", ANA, role="reviewer", description="Reviews pull requests.")
    again = call(service, "agent_register", ANA, role="lead")
    assert (first["created"], again["created"]) == (True, False)
    assert (again["role"], again["description"], again["registered_at"]) == (
        "lead", "Reviews pull requests.", first["registered_at"])
    assert again["last_seen_at"] > first["last_seen_at"]
    assert [a["id"] for a in call(service, "agent_list", ANA)["agents"]] == ["ana"]


def test_a_fresh_heartbeat_is_active_and_list_filters_by_status_and_role(service: Service) -> None:
    call(service, "agent_register", ANA, role="reviewer")
    call(service, "agent_register", BEN, role="worker")
    assert call(service, "agent_heartbeat", BEN)["status"] == "active"
    assert [a["id"] for a in call(service, "agent_list", ANA, status="active")["agents"]] == ["ana", "ben"]
    assert [a["id"] for a in call(service, "agent_list", ANA, role="worker")["agents"]] == ["ben"]
    assert call(service, "agent_list", ANA, status="offline")["count"] == 0


def test_status_follows_the_age_of_the_last_heartbeat(ageing: Service, gone: Service) -> None:
    call(ageing, "agent_register", ANA)
    assert call(ageing, "agent_get", ANA, id="ana")["status"] == "idle"
    assert [a["id"] for a in call(ageing, "agent_list", ANA, status="idle")["agents"]] == ["ana"]
    call(gone, "agent_register", BEN)  # the same store, read with an offline threshold of zero
    assert call(gone, "agent_get", BEN, id="ben")["status"] == "offline"
    assert [a["id"] for a in call(gone, "agent_list", BEN, status="offline")["agents"]] == ["ana", "ben"]
    assert call(gone, "agent_list", BEN, status="idle")["count"] == 0


def test_going_offline_lasts_until_the_next_heartbeat(service: Service) -> None:
    call(service, "agent_register", ANA)
    assert call(service, "agent_offline", ANA)["status"] == "offline"
    assert call(service, "agent_get", BEN, id="ana")["status"] == "offline"
    assert call(service, "agent_list", BEN, status="active")["count"] == 0
    assert call(service, "agent_heartbeat", ANA)["status"] == "active"
    assert call(service, "agent_get", BEN, id="ana")["offline_at"] is None


def test_agent_get_counts_what_the_agent_has_not_read(service: Service) -> None:
    for ctx in (ANA, BEN):
        call(service, "agent_register", ctx)
    call(service, "memory_handoff", ANA, to_agent="ben", task="Review the release notes.")
    call(service, "notify", ANA, to_agent="ben", message="ping")
    found = call(service, "agent_get", ANA, id="ben")
    assert (found["unread_handoffs"], found["unacked_notifications"]) == (1, 2)


def test_heartbeats_and_lookups_of_unknown_agents_are_not_found_with_a_hint(service: Service) -> None:
    call(service, "agent_register", ANA)
    for tool, args in (("agent_heartbeat", {"agent_id": "anna"}), ("agent_get", {"id": "anna"})):
        with pytest.raises(M3Error) as raised:
            call(service, tool, ANA, **args)
        assert raised.value.code == "not_found"
        assert "ana" in raised.value.details["did_you_mean"]


def test_a_call_acting_as_nobody_is_refused_with_a_hint_whether_declared_or_handled(service: Service) -> None:
    nobody = CallContext(agent_id=None)
    for tool, args in (("agent_register", {}), ("notifications_poll", {}), ("task_claim", {})):
        with pytest.raises(M3Error) as raised:
            call(service, tool, nobody, **args)
        assert raised.value.code == "invalid_argument"
        assert raised.value.message.startswith("this call needs an agent")
        assert "M3_IDENTITY_AGENT_ID" in (raised.value.hint or "")


def test_whoami_tells_the_caller_its_identity_binding_isolation_and_registration(service: Service) -> None:
    anonymous = call(service, "agent_whoami", CallContext(agent_id=None))
    assert anonymous == {"agent_id": None, "user_id": None, "bound": False, "isolation": True, "registered": None}
    remote = CallContext(agent_id="reviewer", user_id="dana", bound=True)
    before = call(service, "agent_whoami", remote)
    assert (before["agent_id"], before["user_id"], before["bound"], before["registered"]) == (
        "reviewer", "dana", True, None)
    call(service, "agent_register", remote, role="reviewer")
    call(service, "notify", CallContext(agent_id="lead"), to_agent="reviewer", message="please look at PR 7")
    after = call(service, "agent_whoami", remote)["registered"]
    assert (after["id"], after["role"], after["unacked_notifications"]) == ("reviewer", "reviewer", 1)
