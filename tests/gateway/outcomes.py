"""What one ``m3`` command run printed, and how the JSON contract reads it (shared by the CLI tests)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    status: int
    stdout: str
    stderr: str

    def document(self) -> Any:
        """The one JSON document on stdout (json.loads refuses a second one or stray text)."""
        assert self.status == 0, self.stderr
        return json.loads(self.stdout)

    def error(self, status: int = 1) -> dict[str, Any]:
        """The error document, which must be all of stderr, with nothing on stdout."""
        assert self.status == status, (self.status, self.stderr)
        assert self.stdout == ""
        body: dict[str, Any] = json.loads(self.stderr)["error"]
        assert {"code", "message", "hint"} <= set(body)
        return body


Run = Callable[..., Outcome]
