"""``m3 wheelhouse build DIR``: every wheel m3 needs on this platform, for an install with no network.

Runs ``pip wheel`` (in this interpreter) for m3 and its dependencies, so that the folder holds wheels only
(a dependency published as a source archive is built here, where the compilers and the network are). m3's own
wheel is built from the source tree when m3 runs from one (a checkout, an editable install), else fetched
from the index at the running version. The wheels fit this machine's Python version, platform and ABI: build
the wheelhouse on the same kind of machine as the one without network. pip's output goes to stderr; stdout
carries the JSON answer, with the install command (docs/upgrading.md, "Installing without network").
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from m3 import __version__
from m3.config import Config
from m3.errors import DownloadFailed, InvalidArgument

PROJECT = "m3-memory"
EXTRAS = ("postgres", "flagembedding")


def source_tree() -> Path | None:
    """The checkout m3 runs from (its pyproject.toml names the project), or None for an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and f'name = "{PROJECT}"' in pyproject.read_text(encoding="utf-8"):
        return root
    return None


def requirement(extras: list[str], scratch: Path) -> tuple[str, str]:
    """What pip builds (a clean copy of the source tree in ``scratch``, or the released version) and what the
    offline install names. The copy keeps a build's leftovers (``build/``, stale modules in it) out of the
    checkout and out of the wheel."""
    unknown = sorted(set(extras) - set(EXTRAS))
    if unknown:
        raise InvalidArgument(f"unknown extra {', '.join(unknown)}", hint=f"Extras: {', '.join(EXTRAS)}.")
    suffix = f"[{','.join(extras)}]" if extras else ""
    root = source_tree()
    if root is None:
        return f"{PROJECT}{suffix}=={__version__}", f"{PROJECT}{suffix}"
    shutil.copytree(root / "m3", scratch / "m3", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(root / name, scratch / name)
    return f"{scratch}{suffix}", f"{PROJECT}{suffix}"


def build(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    dest = Path(ns.dir).expanduser().resolve()
    dest.mkdir(parents=True, exist_ok=True)
    extras = [e.strip() for e in (ns.extras or "").split(",") if e.strip()]
    with tempfile.TemporaryDirectory(prefix="m3-wheelhouse-") as scratch:
        return _build(dest, extras, Path(scratch), no_deps=ns.no_deps)


def _build(dest: Path, extras: list[str], scratch: Path, *, no_deps: bool) -> dict[str, Any]:
    target, installs = requirement(extras, scratch)
    command = [sys.executable, "-m", "pip", "wheel", "--wheel-dir", str(dest), target]
    if no_deps:
        command.append("--no-deps")
    done = subprocess.run(command, stdout=sys.stderr, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-5:]
        raise DownloadFailed(f"pip wheel failed (exit {done.returncode}): {' | '.join(tail)}",
                             hint="Run it where the package index is reachable (or set PIP_INDEX_URL to a mirror); "
                                  "pip's own output is above on stderr.",
                             details={"command": command})
    wheels = sorted(p.name for p in dest.glob("*.whl"))
    own = [w for w in wheels if w.startswith("m3_memory-")]
    return {"dir": str(dest), "wheels": len(wheels), "m3_wheel": own[-1] if own else None,
            "python": platform.python_version(), "platform": sysconfig.get_platform(),
            "dependencies": not no_deps,
            "install": f"pip install --no-index --find-links {dest} '{installs}'"}
