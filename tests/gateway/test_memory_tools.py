"""Memory tools through the service, on every store."""

from __future__ import annotations

from typing import Any

import pytest

from m3.actors.system import ActorSystem
from m3.errors import M3Error
from m3.gateway.service import Service
from tests.helpers import call


def test_a_decision_is_found_by_meaning_once_its_vector_exists(service: Service, system: ActorSystem) -> None:
    written = call(service, "memory_write", type="decision", title="project-database",
                   content="We chose PostgreSQL for our website.")
    system.wait_embedded()
    found = call(service, "memory_search", query="Which database did we decide to use?", k=1)
    assert found["items"][0]["id"] == written["id"]
    assert found["items"][0]["bm25_score"] == 0
    assert found["items"][0]["score"] > 0


def test_a_new_version_of_a_fact_retires_the_old_one_and_as_of_sees_the_past(
        service: Service, system: ActorSystem) -> None:
    first = call(service, "memory_write", type="fact", content="The API uses the old PostgreSQL version")
    system.wait_embedded()
    second = call(service, "memory_write", type="fact", content="The API uses the newest PostgreSQL version")
    system.wait_embedded()
    now = call(service, "memory_search", query="Which PostgreSQL version does the API use?", type="fact")
    assert [i["id"] for i in now["items"]] == [second["id"]]
    past = call(service, "memory_search", query="Which PostgreSQL version does the API use?", type="fact",
                as_of=first["recorded_at"])
    assert [i["id"] for i in past["items"]] == [first["id"]]


@pytest.mark.parametrize(("args", "code"), [
    ({"type": "nonsense", "content": "x"}, "unknown_memory_type"),
    ({"content": ""}, "invalid_argument"),
    ({"content": "   "}, "invalid_argument"),
    ({"content": "x" * 100_001}, "content_too_large"),
    ({"content": "x", "valid_from": "yesterday"}, "invalid_time"),
    ({"content": "x", "colour": "red"}, "invalid_argument"),
])
def test_bad_writes_get_a_coded_error_and_store_nothing(service: Service, args: dict[str, Any], code: str) -> None:
    with pytest.raises(M3Error) as err:
        call(service, "memory_write", **args)
    assert err.value.code == code
    assert err.value.hint
    assert call(service, "memory_verify")["checked"] == 0
