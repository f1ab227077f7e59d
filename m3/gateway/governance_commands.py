"""``m3 governance export-zip``: the gdpr_export document as a zip of JSON files, one per section."""

from __future__ import annotations

import argparse
import json
import os
import zipfile
from pathlib import Path
from typing import Any

from m3.config import Config
from m3.errors import InvalidArgument

#: Permissions of the zip: it holds everything about a person.
ZIP_MODE = 0o600


def export_zip(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    """Run gdpr_export as the local user and write each section to ``<section>.json`` in the zip ``ns.zip``."""
    import trio

    from m3.gateway.runtime import running
    from m3.gateway.service import CallContext

    args = {k: v for k, v in (("agent_id", ns.agent_id), ("user_id", ns.user_id)) if v is not None}
    ctx = CallContext(agent_id=config["identity.agent_id"] or None, user_id=config["identity.user_id"] or None)
    with running(config, background=False) as svc:
        document: dict[str, Any] = trio.run(svc.call, "gdpr_export", args, ctx)
    target = Path(ns.zip).expanduser()
    files = write_zip(target, document)
    return {"zip": str(target), "files": files, "subject": document["subject"],
            "counts": {name: len(v) for name, v in document.items() if isinstance(v, list)}}


def write_zip(target: Path, document: dict[str, Any]) -> list[str]:
    """``subject.json`` (subject, time, registration) and one JSON file per list section; the names written."""
    head = {k: v for k, v in document.items() if not isinstance(v, list)}
    parts = {"subject.json": head} | {f"{k}.json": v for k, v in document.items() if isinstance(v, list)}
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, ZIP_MODE)
    except OSError as exc:
        raise InvalidArgument(f"cannot write {target}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as out, zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, part in parts.items():
            archive.writestr(name, json.dumps(part, ensure_ascii=False, indent=2, default=str))
    return list(parts)
