"""Bitemporal versions: memory_update keeps what a memory said before, and reads ask by record or valid time."""

from __future__ import annotations

import pytest

from m3.errors import M3Error
from m3.gateway.service import Service
from tests.helpers import call


def test_an_update_keeps_the_id_and_as_of_before_it_sees_what_the_memory_said(service: Service) -> None:
    written = call(service, "memory_write", type="fact", title="office", content="The office closes at six.")
    updated = call(service, "memory_update", id=written["id"][:8], content="The office closes at nine.",
                   reason="new opening hours")
    assert updated["id"] == written["id"]
    assert updated["content"] == "The office closes at nine."
    before = written["recorded_at"]
    past = call(service, "memory_get", id=written["id"], as_of=before)
    assert (past["content"], past["retired_at"] is not None) == ("The office closes at six.", True)
    assert past["id"] != written["id"]
    now = call(service, "memory_get", id=written["id"])
    assert now["content"] == "The office closes at nine."
    # The keyword leg sees each version at its own time, and only one of them at any time.
    assert [i["content"] for i in call(service, "memory_search", query="office closes", as_of=before)["items"]] == [
        "The office closes at six."]
    assert [i["content"] for i in call(service, "memory_search", query="office closes")["items"]] == [
        "The office closes at nine."]
    history = call(service, "memory_history", id=written["id"])
    assert history["versions"] == [past["id"], written["id"]]
    event = history["events"][-1]
    assert (event["event"], event["details"]["previous"], event["details"]["version"]) == (
        "updated", {"content": "The office closes at six."}, past["id"])
    assert call(service, "memory_history", id=written["id"], as_of=before)["versions"] == [past["id"]]


def test_an_update_that_changes_nothing_makes_no_version(service: Service) -> None:
    written = call(service, "memory_write", content="Backups run nightly.", importance=0.5)
    call(service, "memory_update", id=written["id"], importance=0.5)
    assert call(service, "memory_history", id=written["id"])["versions"] == [written["id"]]


def test_updating_twice_chains_every_version_and_each_as_of_sees_its_own(service: Service) -> None:
    written = call(service, "memory_write", content="The release is version 1.")
    second = call(service, "memory_update", id=written["id"], content="The release is version 2.")
    call(service, "memory_update", id=written["id"], content="The release is version 3.")
    versions = call(service, "memory_history", id=written["id"])["versions"]
    assert len(versions) == 3 and versions[-1] == written["id"]
    contents = [call(service, "memory_get", id=v)["content"] for v in versions]
    assert contents == ["The release is version 1.", "The release is version 2.", "The release is version 3."]
    assert call(service, "memory_get", id=written["id"], as_of=second["recorded_at"])["content"] == (
        "The release is version 2.")


def test_valid_at_answers_what_held_then_even_after_the_fact_was_superseded(service: Service) -> None:
    old = call(service, "memory_write", type="fact", content="Alice leads the platform team.",
               valid_from="2026-01-01T00:00:00Z")
    new = call(service, "memory_supersede", id=old["id"], content="Bob leads the platform team.",
               valid_from="2026-06-01T00:00:00Z")
    query = "Who leads the platform team?"
    assert [i["id"] for i in call(service, "memory_search", query=query)["items"]] == [new["id"]]
    spring = call(service, "memory_search", query=query, valid_at="2026-03-15T00:00:00Z")
    assert [i["id"] for i in spring["items"]] == [old["id"]]
    summer = call(service, "memory_search", query=query, valid_at="2026-07-01T00:00:00Z")
    assert [i["id"] for i in summer["items"]] == [new["id"]]
    assert call(service, "memory_search", query=query, valid_at="2025-12-01T00:00:00Z")["count"] == 0
    assert call(service, "memory_get", id=new["id"], valid_at="2026-03-15T00:00:00Z")["id"] == old["id"]
    assert call(service, "memory_history", id=new["id"], valid_at="2026-07-01T00:00:00Z")["versions"] == [
        new["id"]]
    # Known at a time before the supersession, the old fact was still open-ended: it held in July too.
    known_then = call(service, "memory_search", query=query, valid_at="2026-07-01T00:00:00Z",
                      as_of=old["recorded_at"])
    assert [i["id"] for i in known_then["items"]] == [old["id"]]


def test_a_deleted_memory_holds_at_no_valid_time_and_get_says_when_nothing_was_current(service: Service) -> None:
    gone = call(service, "memory_write", content="The cafeteria serves breakfast.", valid_from="2026-01-01T00:00:00Z")
    call(service, "memory_delete", id=gone["id"])
    assert call(service, "memory_search", query="cafeteria breakfast", valid_at="2026-02-01T00:00:00Z")["count"] == 0
    with pytest.raises(M3Error) as err:
        call(service, "memory_get", id=gone["id"], valid_at="2026-02-01T00:00:00Z")
    assert err.value.code == "not_found"
    assert call(service, "memory_get", id=gone["id"])["retire_reason"] == "deleted"
