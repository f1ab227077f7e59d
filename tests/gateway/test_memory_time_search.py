"""memory_search reads the times a question names relative to ``now`` and favours memories valid then."""

from __future__ import annotations

import pytest

from m3.actors.system import ActorSystem
from m3.errors import M3Error
from m3.gateway.service import Service
from tests.helpers import call

HIKE = "Went hiking with Sam along the ridge above the lake"


def _two_hikes(service: Service, system: ActorSystem) -> tuple[str, str]:
    """Two event memories alike in words and meaning, one valid in May 2023, one in August 2023."""
    may = call(service, "memory_write", type="event", content=f"{HIKE}.", valid_from="2023-05-14T10:00:00Z")
    august = call(service, "memory_write", type="event", content=f"{HIKE}!", valid_from="2023-08-20T10:00:00Z")
    system.wait_embedded()
    return may["id"], august["id"]


def _ids(found: dict[str, object]) -> list[str]:
    return [item["id"] for item in found["items"]]  # type: ignore[index, union-attr]


def test_a_question_naming_a_time_ranks_the_memory_of_that_time_first(service: Service, system: ActorSystem) -> None:
    may, august = _two_hikes(service, system)
    asked = "2023-09-01T12:00:00Z"
    assert _ids(call(service, "memory_search", query="Where did I go hiking in May 2023?", now=asked))[0] == may
    assert _ids(call(service, "memory_search", query="Where did I go hiking in August?", now=asked))[0] == august


def test_now_changes_what_a_relative_time_means(service: Service, system: ActorSystem) -> None:
    may, august = _two_hikes(service, system)
    query = "Where did I go hiking last month?"
    assert _ids(call(service, "memory_search", query=query, now="2023-09-03T08:00:00Z"))[0] == august
    assert _ids(call(service, "memory_search", query=query, now="2023-06-02T08:00:00Z"))[0] == may


def test_explain_shows_the_time_signal_its_weight_and_the_window(service: Service, system: ActorSystem) -> None:
    may, _ = _two_hikes(service, system)
    found = call(service, "memory_search", query="hiking two weeks ago", now="2023-05-28T09:00:00Z", explain=True)
    first = found["items"][0]
    assert first["id"] == may
    explanation = first["explanation"]
    assert explanation["signals"]["time"]["value"] == 1.0
    assert explanation["signals"]["time"]["weight"] == service.config["search.weight_time"] > 0
    assert explanation["time_windows"] == [{"text": "two weeks ago", "start": "2023-05-11T00:00:00+00:00",
                                            "end": "2023-05-18T00:00:00+00:00"}]
    later = found["items"][1]["explanation"]["signals"]["time"]
    assert 0 <= later["value"] < 1.0


def test_a_query_without_a_time_gives_the_time_signal_no_weight(service: Service, system: ActorSystem) -> None:
    _two_hikes(service, system)
    found = call(service, "memory_search", query="Where did I go hiking with Sam?", explain=True,
                 now="2023-09-01T12:00:00Z")
    for item in found["items"]:
        signals = item["explanation"]["signals"]
        assert signals["time"] == {"value": 0.0, "weight": 0.0, "contribution": 0.0}
        assert item["explanation"]["time_windows"] == []
        total = sum(s["weight"] for s in signals.values())
        assert item["score"] == pytest.approx(sum(s["weight"] * s["value"] for s in signals.values()) / total,
                                              abs=1e-5)


@pytest.mark.parametrize("bad", ["yesterday", "2023-13-01", "not a time"])
def test_a_now_that_is_not_an_iso_time_is_refused(service: Service, bad: str) -> None:
    with pytest.raises(M3Error) as err:
        call(service, "memory_search", query="hiking", now=bad)
    assert err.value.code == "invalid_time"
    assert err.value.hint
