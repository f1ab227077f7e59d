"""What a writing agent sees of similarity supersession through the command line: a notification naming
both memories when its write replaced one, history saying why, and distinct facts left alone."""

from __future__ import annotations

from tests.gateway.outcomes import Run
from tests.gateway.test_cli import cli

__all__ = ["cli"]

OLD, NEW = "The API uses the old PostgreSQL version", "The API uses the newest PostgreSQL version"


def test_the_writer_is_notified_which_memory_its_write_replaced_and_history_says_why(cli: Run) -> None:
    old = cli("memory", "write", "--type", "fact", "--content", OLD).document()
    new = cli("memory", "write", "--type", "fact", "--content", NEW).document()
    assert new["created"] is True
    polled = cli("notifications", "poll").document()
    [note] = [n for n in polled["items"] if n["kind"] == "superseded"]
    assert old["id"] in note["message"] and new["id"] in note["message"]
    assert (note["data"]["memory_id"], note["data"]["superseded"]) == (new["id"], old["id"])
    history = cli("memory", "history", "--id", old["id"]).document()
    superseded = [e for e in history["events"] if e["event"] == "superseded"]
    assert superseded[0]["details"]["by"] == new["id"]
    assert "anchors agree" in superseded[0]["details"]["reason"]
    assert history["versions"] == [old["id"], new["id"]]


def test_two_notes_differing_only_in_a_customer_number_both_stay_current(cli: Run) -> None:
    first = cli("memory", "write", "--type", "fact", "--content",
                "Customer 4411 ordered 3 laptops on 2026-11-02.").document()
    second = cli("memory", "write", "--type", "fact", "--content",
                 "Customer 4412 ordered 3 laptops on 2026-11-02.").document()
    for written in (first, second):
        assert cli("memory", "get", "--id", written["id"]).document()["retired_at"] is None
    assert [n for n in cli("notifications", "poll").document()["items"] if n["kind"] == "superseded"] == []
    events = cli("memory", "history", "--id", first["id"]).document()["events"]
    assert [e["details"]["other"] for e in events if e["event"] == "conflict_detected"] == [second["id"]]


def test_conflicts_list_shows_the_pair_and_resolving_it_keep_b_retires_the_older(cli: Run) -> None:
    first = cli("memory", "write", "--type", "fact", "--content", "I lead a team of 4 engineers.").document()
    second = cli("memory", "write", "--type", "fact", "--content", "I lead a team of 5 engineers.").document()
    listed = cli("conflicts", "list").document()
    assert listed["count"] == 1
    [found] = listed["items"]
    assert (found["memory_a"], found["memory_b"], found["reason"]) == (first["id"], second["id"], "number: 4 vs 5")
    done = cli("conflicts", "resolve", "--id", found["id"], "--resolution", "keep_b").document()
    assert (done["status"], done["resolution"], done["resolved_by"]) == ("resolved", "keep_b", "local")
    assert cli("memory", "get", "--id", first["id"]).document()["superseded_by"] == second["id"]
    assert cli("conflicts", "list").document()["count"] == 0
    assert cli("conflicts", "list", "--status", "resolved").document()["count"] == 1
    again = cli("conflicts", "resolve", "--id", found["id"], "--resolution", "keep_a").error()
    assert again["code"] == "invalid_argument"
    assert cli("conflicts", "resolve", "--id", "nope", "--resolution", "keep_both").error()["code"] == "not_found"
