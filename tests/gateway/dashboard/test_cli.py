"""``m3 dashboard`` and ``m3 wiki generate`` as a person runs them: memories written with the CLI, the dashboard
served by its own process relaying to the store's engine, pages fetched over a real socket, a pin made through a
form, a cross-site POST refused; the wiki written; a bind off loopback without the token refused."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import httpx2
import pytest

from tests.gateway.outcomes import Run


@pytest.mark.store_only("sqlite", reason="the engine relays the same tool calls on both stores (test_pages.py)")
def test_the_dashboard_process_serves_the_engines_store_and_refuses_a_cross_site_post(
        m3: Run, m3_executable: str, child_env: dict[str, str], tmp_path: Path) -> None:
    written = m3("memory", "write", "--content", "The office wifi is called Kestrel.", "--type", "fact",
                 "--scope", "org", "--title", "Wifi").document()
    server = subprocess.Popen([m3_executable, "dashboard", "--port", "0"], env=child_env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        started = json.loads(server.stdout.readline())
        assert started["agent"] == "dashboard" and started["url"].startswith("http://127.0.0.1:")
        base = started["url"].rstrip("/")
        with httpx2.Client(base_url=base, timeout=30) as http:
            assert "Kestrel" in http.get("/").text
            page = http.get(f"/memory/{written['id']}").text
            token = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
            assert token is not None
            pin = f"/memory/{written['id']}/pin"
            assert http.post(pin, data={"csrf": token.group(1)}, headers={"origin": "http://evil.example"}
                             ).status_code == 403
            done = http.post(pin, data={"csrf": token.group(1)}, headers={"origin": base}, follow_redirects=False)
            assert done.status_code == 303
        history = m3("memory", "history", "--id", written["id"]).document()
        # One event after the creation: the pin of the same-origin POST, by the dashboard (not the cross-site one).
        assert [(ev["event"], ev["actor"]) for ev in history["events"][1:]] == [("pinned", "dashboard")]
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)
    assert server.returncode == 0
    first = m3("wiki", "generate", "--format", "markdown", "--out", str(tmp_path / "wiki")).document()
    assert first["written"] == first["pages"] > 0
    assert "Kestrel" in (tmp_path / "wiki" / f"memories/wifi-{written['id'][:8]}.md").read_text()
    refused = m3("dashboard", "--host", "0.0.0.0", "--port", "0").error()  # off loopback, and no token is set
    assert refused["code"] == "invalid_argument" and "m3 secret set dashboard.token" in refused["hint"]

