"""``m3 setup``: wire m3 into the agent clients installed here (docs/setup.md).

``clients`` is the table of clients (where each keeps its MCP servers and how it spells one),
``jsonedit`` and ``tomledit`` change one entry of a file and nothing else, ``edit`` picks the right one
for a client, and ``run`` plans, backs up, writes and reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from m3.config import Config
    from m3.gateway.doctor import Check, Finding


def doctor_checks() -> list[Check]:
    """``m3 doctor``'s agent wiring: each installed client has m3's current entry (a dry run of ``m3 setup``)."""
    from m3.gateway.doctor import Check

    return [Check("setup", _wiring)]


def _wiring(config: Config) -> list[Finding]:
    import os

    from m3.errors import M3Error
    from m3.gateway.doctor import Finding
    from m3.gateway.setup.clients import Places
    from m3.gateway.setup.run import run_setup

    try:
        report = run_setup(Places.of(os.environ), dry_run=True)
    except M3Error as exc:
        return [Finding("setup.wiring", "warn", exc.message, exc.hint)]
    found = [row for row in report["clients"] if row["installed"]]
    if not found:
        return [Finding("setup.wiring", "ok", "no agent client found here")]
    stale = [row["label"] for row in found if row["change"] != "none"]
    if stale:
        return [Finding("setup.wiring", "warn", f"m3 is not set up (or is out of date) in: {', '.join(stale)}",
                        "Run `m3 setup --dry-run` to see the change, then `m3 setup`.")]
    return [Finding("setup.wiring", "ok", f"m3 is set up in {', '.join(row['label'] for row in found)}")]
