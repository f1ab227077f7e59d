"""`m3 doctor` and diagnostics_store_status say which path search's hot loops take (search.native)."""

from __future__ import annotations

import json

import pytest

from m3.actors.system import ActorSystem
from m3.gateway.service import Service
from m3.retrieval import native
from tests.gateway.outcomes import Run
from tests.helpers import call


def native_finding(cli: Run) -> dict[str, str]:
    outcome = cli("doctor", "--json")
    assert "Traceback" not in outcome.stderr
    rows = [r for r in json.loads(outcome.stdout)["checks"] if r["check"] == "install.native"]
    assert len(rows) == 1
    return dict(rows[0])


def test_doctor_names_the_path_search_takes(cli: Run, monkeypatch: pytest.MonkeyPatch, store_url: str) -> None:
    monkeypatch.setenv("M3_STORE_URL", store_url)
    monkeypatch.setenv("M3_SEARCH_NATIVE", "off")
    off = native_finding(cli)
    assert off["status"] == "ok" and "numpy path" in off["message"] and "search.native=off" in off["message"]
    monkeypatch.setenv("M3_SEARCH_NATIVE", "auto")
    expected = "native path" if native.available() else "numpy path"
    assert expected in native_finding(cli)["message"]


def test_doctor_fails_search_native_on_without_the_extension(cli: Run, monkeypatch: pytest.MonkeyPatch,
                                                              store_url: str) -> None:
    monkeypatch.setenv("M3_STORE_URL", store_url)
    monkeypatch.setenv("M3_SEARCH_NATIVE", "on")
    monkeypatch.setattr(native, "_EXT", None)  # as where `pip install ./native` never ran
    finding = native_finding(cli)
    assert finding["status"] == "fail" and "not installed" in finding["message"]
    assert "pip install ./native" in finding["hint"]


def test_store_status_shows_the_search_path_in_use_and_how_queries_embed(service: Service,
                                                                         system: ActorSystem) -> None:
    call(service, "memory_write", content="The spare key hangs behind the kitchen door.")
    system.wait_embedded(60.0)  # so that the search waits for its query's vector
    call(service, "memory_search", query="where is the spare key")
    status = call(service, "diagnostics_store_status")
    assert status["search_path"] == {**native.status(), "query_embedding": "int8"}
    assert status["search_path"]["path"] in ("native", "numpy")
