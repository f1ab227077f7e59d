"""One cross-front-end wake-up, shared by the engine tests: a wait parked through one front-end, a notify sent
through another, the wait's answer and how long after the notify's acknowledgement it came."""

from __future__ import annotations

import threading
import time
from typing import Any

from m3.config import Config
from m3.gateway.engine import client
from m3.gateway.engine.calls import relay


def wake_across(waiting: Config, sending: Config, message: str,
                settings: tuple[str | None, str | None] = (None, None)) -> tuple[dict[str, Any], float]:
    """Register ``waiter`` (through ``waiting``) and ``sender`` (through ``sending``), park a 20 s wait, notify
    once the engine's log shows it parked (``settings``: each front-end's settings fingerprint); the wait's
    answer body and its delay after the notify's ack (s)."""
    waiter = client.identity_headers("waiter", "", settings[0])
    sender = client.identity_headers("sender", "", settings[1])
    assert relay(waiting, "agent_register", {}, headers=waiter)[0] == 200
    assert relay(sending, "agent_register", {}, headers=sender)[0] == 200
    got: dict[str, Any] = {}

    def wait() -> None:
        got["answer"] = relay(waiting, "notifications_wait", {"timeout": 20}, headers=waiter)
        got["woke"] = time.monotonic()

    thread = threading.Thread(target=wait)
    thread.start()
    log = waiting.logs_root / "m3.log"
    deadline = time.monotonic() + 20
    while "agent waiter waits for notifications" not in log.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    code, _ = relay(sending, "notify", {"to_agent": "waiter", "message": message}, headers=sender)
    acked = time.monotonic()
    assert code == 200
    thread.join(timeout=20)
    assert not thread.is_alive()
    code, body = got["answer"]
    assert code == 200 and body["timed_out"] is False
    return body, got["woke"] - acked
