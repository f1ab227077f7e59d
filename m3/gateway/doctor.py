"""``m3 doctor [--fix] [--json]``: what is wrong with this installation, and how to fix it.

Each check returns findings: ``ok``, ``warn`` or ``fail``, a message saying what was found and a hint saying
what to do. A finding may carry a *fix*, which ``--fix`` runs when it is safe to (file modes, migrations, the
move of a plaintext secrets file into the vault); the report then says what was fixed and runs the check again.
The exit status is 1 when any finding (after fixes) is ``fail``.

Extension point: the checks are :data:`CHECKS` (doctor_checks.py) plus those of the modules named in
:data:`EXTENSIONS`, each of which may define ``doctor_checks() -> Iterable[Check]`` (the engine of issue 14,
``m3 setup``'s agent wiring). A module that does not exist yet is skipped; one that fails to import is a finding.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from m3.config import SETTINGS, Config, config_root, home_dir, load_config
from m3.errors import M3Error

Status = Literal["ok", "warn", "fail"]
#: Modules that may add checks (``doctor_checks()``); the engine and ``m3 setup`` live there once they exist.
EXTENSIONS = ("m3.gateway.engine", "m3.gateway.setup")


@dataclass
class Finding:
    check: str
    status: Status
    message: str
    hint: str | None = None
    #: Repairs the problem and says what it did; run by ``--fix`` only.
    fix: Callable[[], str] | None = None
    data: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.check, "status": self.status, "message": self.message}
        if self.hint and self.status != "ok":
            out["hint"] = self.hint
        if self.fix is not None:
            out["fixable"] = True
        if self.data:
            out["data"] = self.data
        return out


@dataclass(frozen=True)
class Check:
    group: str
    run: Callable[[Config], list[Finding]]


@dataclass
class Report:
    """An admin command's answer with its own exit status (``m3 doctor`` exits 1 on a failed check)."""

    document: dict[str, Any]
    status: int
    text: str = field(default="")


class FallbackConfig(Config):
    """The defaults, when the configuration itself does not load: doctor still runs and reports why."""

    def __init__(self, error: M3Error, env: dict[str, str]):
        values = {s.key: s.default for s in SETTINGS}
        origins: dict[str, Any] = dict.fromkeys(values, "default")
        super().__init__(values, origins, home_dir(env), config_root(env) / "m3_config.toml")
        self.load_error = error


def checks() -> list[Check]:
    from m3.gateway.doctor_checks import CHECKS

    found = list(CHECKS)
    for name in EXTENSIONS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                found.append(_absent_extension(name))  # not part of this version
                continue
            found.append(_broken_extension(name, exc))
            continue
        provider = getattr(module, "doctor_checks", None)
        if provider is not None:
            found.extend(provider())
    return found


def _absent_extension(name: str) -> Check:
    group = name.rsplit(".", 1)[-1]

    def run(config: Config) -> list[Finding]:
        return [Finding(f"{group}.checks", "ok", f"not checked: {name} is not part of this version")]
    return Check(group, run)


def _broken_extension(name: str, exc: Exception) -> Check:
    def run(config: Config) -> list[Finding]:
        return [Finding(f"{name}.import", "fail", f"{name} does not import: {type(exc).__name__}: {exc}",
                        "Reinstall m3 (`pip install --force-reinstall m3-memory`).")]
    return Check(name.rsplit(".", 1)[-1], run)


def run_checks(config: Config, selected: Iterable[Check], *, fix: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for check in selected:
        findings = _safely(check, config)
        fixed = {f.check: _apply(f) for f in findings if fix and f.fix is not None and f.status != "ok"}
        if fixed:
            findings = _safely(check, config)  # the same check again: did the fix work?
        out.extend({**f.to_dict(), **({"fixed": fixed[f.check]} if f.check in fixed else {})} for f in findings)
    return out


def _safely(check: Check, config: Config) -> list[Finding]:
    try:
        return check.run(config)
    except M3Error as exc:
        return [Finding(f"{check.group}.error", "fail", exc.message, exc.hint)]
    except Exception as exc:  # a check must report, never crash the report
        return [Finding(f"{check.group}.error", "fail", f"the check failed: {type(exc).__name__}: {exc}",
                        "This is a bug in m3's doctor; please report it.")]


def _apply(finding: Finding) -> str:
    assert finding.fix is not None
    try:
        return finding.fix()
    except M3Error as exc:
        return f"could not fix: {exc.message}"


def doctor(config: Config, ns: argparse.Namespace) -> Report:
    results = run_checks(config, checks(), fix=ns.fix)
    if ns.fix and isinstance(config, FallbackConfig):  # a fix (a file mode) may have let the configuration load
        try:
            config = load_config()
        except M3Error:
            pass
        else:
            fixed = {r["check"]: r["fixed"] for r in results if "fixed" in r}
            results = [{**r, **({"fixed": fixed[r["check"]]} if r["check"] in fixed else {})}
                       for r in run_checks(config, checks(), fix=False)]
    counts = {s: sum(1 for r in results if r["status"] == s) for s in ("ok", "warn", "fail")}
    from m3.gateway.doctor_checks import renames

    document = {"ok": counts["fail"] == 0, "summary": counts, "checks": results, "renames": renames()}
    as_text = not ns.json and sys.stdout.isatty()
    return Report(document, 0 if document["ok"] else 1, text(document) if as_text else "")


def text(document: dict[str, Any]) -> str:
    """The report for a person (a terminal without ``--json``)."""
    lines = []
    for r in document["checks"]:
        lines.append(f"{r['status']:<5} {r['check']:<24} {r['message']}")
        if r.get("fixed"):
            lines.append(f"{'':<30}fixed: {r['fixed']}")
        if r["status"] != "ok" and r.get("hint"):
            lines.append(f"{'':<30}-> {r['hint']}")
    s = document["summary"]
    lines.append(f"\n{s['ok']} ok, {s['warn']} warnings, {s['fail']} failed"
                 + ("" if document["ok"] else " (`m3 doctor --fix` repairs what is marked fixable)"))
    return "\n".join(lines) + "\n"
