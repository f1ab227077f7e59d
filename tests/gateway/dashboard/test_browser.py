"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, driven by Selenium): load each
page, filter, open a memory, pin it, resolve a conflict, download a GDPR export; the store changed each time.

SQLite only: the pages call the same tools on both stores, which test_pages.py covers over HTTP. Without the
browser the test fails in CI (CI=true; scripts/test installs it) and is skipped elsewhere, saying why. With
``M3_DASHBOARD_SCREENSHOTS=DIR`` it also saves a PNG of each main page into DIR (docs/images/ holds them).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from m3.gateway.dashboard.app import build_app
from m3.gateway.dashboard.calls import ServiceCaller
from m3.gateway.dashboard.security import Policy
from m3.gateway.http_guard import serve_asgi
from m3.gateway.service import CallContext, Service
from tests.gateway.dashboard.seed import seed
from tests.helpers import call

DASH = CallContext(agent_id="dashboard")
#: Read at import: the fixtures take M3_* variables out of the environment of each test.
SCREENSHOTS = os.environ.get("M3_DASHBOARD_SCREENSHOTS")
SHOTS = {"/": "memories", "/search?q=laptops": "search", "/agents?agent=agent-b": "agents", "/tasks": "tasks",
         "/graph": "graph", "/conflicts": "conflicts", "/audit": "audit", "/health": "health"}


def browser_paths() -> tuple[str, str]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        why = "Debian's chromium and chromium-driver are not installed (scripts/test installs them)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return chromium, driver


@contextmanager
def served(service: Service) -> Iterator[str]:
    """The dashboard on a free loopback port, served by a trio loop in a thread of its own."""
    policy = Policy(host="127.0.0.1")
    app = build_app(ServiceCaller(service, "dashboard"), policy)
    ready, box = threading.Event(), {}

    async def main() -> None:
        box["token"], box["stop"] = trio.lowlevel.current_trio_token(), trio.Event()

        def on_ready(binds: list[str]) -> None:
            policy.port = int(binds[0].rsplit(":", 1)[1])
            ready.set()

        await serve_asgi(app, "127.0.0.1", 0, ready=on_ready, shutdown=box["stop"])

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert ready.wait(30), "the dashboard did not start"
    try:
        yield f"http://127.0.0.1:{policy.port}"
    finally:
        box["token"].run_sync_soon(box["stop"].set)
        thread.join(30)


@contextmanager
def chromium(downloads: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    binary, driver_path = browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(options=options, service=DriverService(executable_path=driver_path))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(found: Any, seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("waited in vain")


def complete_json(path: Path) -> Any:
    """The JSON document in ``path``, or None while the file is missing or still being written."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@pytest.mark.store_only("sqlite", reason="the pages call the same tools on both stores; test_pages.py covers both")
def test_a_person_browses_filters_pins_resolves_and_exports_in_chromium(service: Service, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser_paths()
    ids = trio.run(seed, service)
    shots = SCREENSHOTS
    with served(service) as base, chromium(tmp_path) as driver:
        for path, name in SHOTS.items():
            driver.get(base + path)
            assert driver.title.endswith("· m3") and "failed" not in driver.title, (path, driver.title)
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(Path(shots) / f"dashboard-{name}.png"))
        if shots:
            driver.get(f"{base}/graph?memory={ids['decision']}")
            driver.save_screenshot(str(Path(shots) / "dashboard-links.png"))
        driver.get(base + "/")
        Select(driver.find_element(By.NAME, "type")).select_by_value("decision")
        driver.find_element(By.CSS_SELECTOR, "form.filters button").click()
        wait_for(lambda: "type=decision" in driver.current_url)
        assert "Deploy rule" in driver.page_source and "Order 4411" not in driver.page_source

        driver.get(base + "/")
        driver.find_element(By.CSS_SELECTOR, f'a[href="/memory/{ids["order_a"]}"]').click()
        wait_for(lambda: driver.title.startswith("Order 4411"))
        if shots:
            driver.save_screenshot(str(Path(shots) / "dashboard-memory.png"))
        driver.find_element(By.XPATH, "//button[text()='Pin']").click()
        wait_for(lambda: "done=pinned" in driver.current_url)
        assert call(service, "memory_get", DASH, id=ids["order_a"])["pinned"] is True

        driver.get(base + "/conflicts")
        driver.find_element(By.XPATH, "//button[text()='Keep both']").click()
        wait_for(lambda: "done=resolved" in driver.current_url)
        resolved = call(service, "conflicts_list", DASH, status="resolved")["items"]
        assert [(c["id"], c["resolution"]) for c in resolved] == [(ids["conflict"], "keep_both")]

        driver.get(base + "/audit")
        driver.find_element(By.CSS_SELECTOR, 'form[action="/gdpr/export"] input[name="subject"]').send_keys("alice")
        driver.find_element(By.XPATH, "//button[text()='Download export']").click()
        # The browser may show the file before it has written all of it: wait for a whole JSON document.
        document = wait_for(lambda: complete_json(tmp_path / "m3-gdpr-alice.json"))
        assert document["subject"] == {"kind": "user", "id": "alice"}
        assert {m["id"] for m in document["memories"]} >= {ids["order_a"], ids["order_b"]}
