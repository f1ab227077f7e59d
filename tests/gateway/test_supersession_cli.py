"""What a writing agent sees of similarity supersession through the command line: a notification naming
both memories when its write replaced one, history saying why, and distinct facts left alone."""

from __future__ import annotations

from tests.gateway.test_cli import Run, cli

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
