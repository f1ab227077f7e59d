"""``m3 setup``: find the agent clients installed here and add m3's stdio MCP server to each (or remove it).

Every file is planned before any is written, so a malformed one stops the run with nothing changed. A
file that changes is first copied beside itself (``<name>.m3-backup-<UTC time>``), then replaced
atomically, keeping its permissions. Each client gets its own agent identity
(``M3_IDENTITY_AGENT_ID=<client id>``), so what it writes is recorded as that agent's.
"""

from __future__ import annotations

import difflib
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from m3.errors import ClientConfigChanged, ClientConfigMalformed, ClientConfigUnwritable
from m3.gateway.setup import edit
from m3.gateway.setup.clients import BY_ID, CLIENTS, Client, Launch, Places

#: The variable that names the agent a client's m3 acts as (setting identity.agent_id, m3/config.py).
AGENT_VARIABLE = "M3_IDENTITY_AGENT_ID"


def m3_command() -> tuple[str, tuple[str, ...]]:
    """The absolute path of this environment's ``m3`` script (bare ``m3`` serves MCP on stdio), else
    ``python -m m3`` with this interpreter."""
    beside = Path(sys.executable).with_name("m3")  # not resolved: a venv's python is a link out of the venv
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside), ()
    found = shutil.which("m3")
    if found is not None:
        return str(Path(found).absolute()), ()
    return sys.executable, ("-m", "m3")


def launch_for(client: Client, env: Mapping[str, str]) -> Launch:
    command, args = m3_command()
    variables = {AGENT_VARIABLE: client.id}
    if env.get("M3_HOME"):  # a relocated m3 home: the client's m3 must use the same one
        variables["M3_HOME"] = str(Path(env["M3_HOME"]).expanduser().absolute())
    return Launch(command, args, variables)


@dataclass(frozen=True)
class Change:
    client: Client
    file: Path
    installed: bool
    before: str | None
    after: str | None
    #: add, update, remove or none.
    action: str
    reason: str = ""

    def diff(self) -> str:
        old, new = self.before or "", self.after if self.after is not None else (self.before or "")
        return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                            f"{self.file} (now)" if self.before is not None else "/dev/null",
                                            f"{self.file} (after m3 setup)"))


def plan(client: Client, places: Places, *, remove: bool, named: bool) -> Change:
    """What setting up (or removing) m3 would do to ``client``'s file; reads only."""
    path = client.file(places)
    installed = client.installed(places)
    before = _read(path)
    where = str(path)
    if not installed and not named:
        return Change(client, path, installed, before, None, "none", "not installed")
    if remove:
        if before is None or edit.current_entry(client, before, where) is None:
            return Change(client, path, installed, before, None, "none", "m3 is not set up")
        return Change(client, path, installed, before, edit.without_entry(client, before, where), "remove")
    entry = client.shape(launch_for(client, places.env))
    existing = edit.current_entry(client, before, where) if before is not None else None
    if existing == entry:
        return Change(client, path, installed, before, None, "none", "m3 is already set up")
    after = edit.with_entry(client, before, entry, where)
    return Change(client, path, installed, before, after, "add" if existing is None else "update")


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")  # as it is: CRLF line ends stay CRLF
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ClientConfigMalformed(f"{path} is not UTF-8 text", details={"file": str(path)}) from None
    except OSError as exc:
        raise ClientConfigUnwritable(f"cannot read {path}: {exc.strerror}", details={"file": str(path)}) from None


def backup_path(path: Path, now: datetime) -> Path:
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate, n = path.with_name(f"{path.name}.m3-backup-{stamp}"), 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.m3-backup-{stamp}-{n}")
    return candidate


def apply(change: Change, now: datetime) -> Path | None:
    """Write ``change`` (after a backup of the file it replaces); returns the backup's path."""
    assert change.after is not None
    backup = None
    path = change.file.resolve() if change.file.is_symlink() else change.file  # a dotfile link stays a link
    if _read(change.file) != change.before:  # e.g. Claude Code saved ~/.claude.json since it was read
        raise ClientConfigChanged(f"{change.file} changed while m3 setup ran; nothing was written to it",
                                  details={"file": str(change.file)})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o600
        if change.before is not None:
            backup = backup_path(change.file, now)
            shutil.copy2(path, backup)
            mode = path.stat().st_mode & 0o7777
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".m3-tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                out.write(change.after)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, mode)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ClientConfigUnwritable(f"cannot write {path}: {exc.strerror}", details={"file": str(path)}) from None
    return backup


def run_setup(places: Places, *, remove: bool = False, dry_run: bool = False, only: Sequence[str] = (),
              now: datetime | None = None) -> dict[str, Any]:
    """Plan every client (or those in ``only``), then, unless ``dry_run``, write the changes; the report."""
    clients = [BY_ID[name] for name in only] if only else list(CLIENTS)
    changes = [plan(c, places, remove=remove, named=bool(only)) for c in clients]  # all before any write
    moment = now or datetime.now(UTC)
    rows = []
    for change in changes:
        backup = apply(change, moment) if change.action != "none" and not dry_run else None
        row: dict[str, Any] = {"client": change.client.id, "label": change.client.label, "file": str(change.file),
                               "installed": change.installed, "change": change.action,
                               "written": change.action != "none" and not dry_run,
                               "backup": str(backup) if backup else None, "doc": change.client.doc}
        if change.reason:
            row["reason"] = change.reason
        if dry_run and change.action != "none":
            row["diff"] = change.diff()
        rows.append(row)
    command, args = m3_command()
    changed = sum(r["change"] != "none" for r in rows)
    return {"action": "remove" if remove else "setup", "dry_run": dry_run,
            "server": {"name": edit.SERVER_NAME, "command": command, "args": list(args)},
            "changed": changed, "clients": rows, "message": _message(rows, changed, remove, dry_run)}


def _message(rows: list[dict[str, Any]], changed: int, remove: bool, dry_run: bool) -> str:
    if not any(r["installed"] or r["change"] != "none" for r in rows):
        return "no agent client found here; name one with --client to set it up anyway"
    if changed == 0:
        return ("nothing to change: no client has m3 set up" if remove
                else "nothing to change: m3 is already set up in every client found")
    verb = "would change" if dry_run else "changed"
    return f"{verb} {changed} file{'s' if changed != 1 else ''}" + (" (dry run: nothing written)" if dry_run else "")


def render_text(report: dict[str, Any]) -> str:
    """The report for a person: one line per client, the diffs of a dry run, then the summary."""
    lines = []
    done = {"add": "added m3", "update": "updated m3's entry", "remove": "removed m3"}
    planned = {"add": "would add m3", "update": "would update m3's entry", "remove": "would remove m3"}
    absent = [row["label"] for row in report["clients"] if row.get("reason") == "not installed"]
    for row in report["clients"]:
        if row.get("reason") == "not installed":
            continue
        what = row.get("reason", "") if row["change"] == "none" else (planned if report["dry_run"] else done)[
            row["change"]]
        backup = f" (backup: {row['backup']})" if row["backup"] else ""
        lines.append(f"{row['label']}: {what} - {row['file']}{backup}")
        if row.get("diff"):
            lines.append(row["diff"].rstrip("\n"))
    if absent:
        lines.append("Not found here: " + ", ".join(absent))
    lines.append(report["message"])
    return "\n".join(lines) + "\n"
