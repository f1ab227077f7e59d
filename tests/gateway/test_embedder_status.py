"""The embedder_status tool (`m3 embedder status`): configured and active model, counts, route."""

from __future__ import annotations

from m3.gateway.service import Service
from tests.helpers import call


def test_status_reports_the_model_search_uses_and_how_many_memories_have_its_vectors(service: Service) -> None:
    for content in ("The boiler is serviced in October.", "Passports are in the top drawer."):
        call(service, "memory_write", content=content)
    service.system.wait_embedded()
    status = call(service, "embedder_status")
    assert status == {
        "backend": "minilm", "model": "all-MiniLM-L6-v2-int8", "dim": 384, "loaded": True, "pending": 0,
        "vectors_by_model": {"all-MiniLM-L6-v2-int8": 2}, "memories": 2,
        "active_model": "all-MiniLM-L6-v2-int8", "reembedding": False, "queued": 0, "last_error": None,
        "server": None,
    }
