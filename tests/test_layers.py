"""The import-layer rule of DESIGN.md: gateway → actors → cognition → retrieval → (store, embed) → protocols →
(errors, config), with the crypto provider (m3/crypto) below config: config reads the encrypted secrets.
The framework integrations (m3/integrations) sit beside the gateway as entry points: they may import it,
nothing imports them.

Checked on the source with ``ast``, so imports inside functions count too.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from m3.actors.base import M3Actor

PACKAGE = Path(__file__).resolve().parents[1] / "m3"

#: For each layer, the m3 layers it may import (itself always allowed).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "crypto": {"errors"},
    "config": {"errors", "crypto"},
    "protocols": {"errors", "config", "crypto"},
    "store": {"protocols", "errors", "config", "crypto"},
    "embed": {"protocols", "errors", "config", "crypto"},
    "retrieval": {"store", "embed", "protocols", "errors", "config", "crypto"},
    # Above retrieval: the cognitive loop's pure logic (entity extraction, Observer/Reflector passes). The Reflector
    # applies retrieval's anchor rules; retrieval never imports cognition.
    "cognition": {"retrieval", "store", "embed", "protocols", "errors", "config", "crypto"},
    "actors": {"retrieval", "cognition", "store", "embed", "protocols", "errors", "config", "crypto"},
    "gateway": {"actors", "retrieval", "cognition", "store", "embed", "protocols", "errors", "config", "crypto"},
    # Framework integrations: an entry-point layer beside the gateway (they run the in-process Service).
    "integrations": {"gateway", "actors", "retrieval", "cognition", "store", "embed", "protocols", "errors", "config",
                     "crypto"},
}
#: The layers nothing else imports: the program's entry points.
ENTRY_POINTS = {"gateway", "integrations"}
ROOT_MODULES = {"__init__", "__main__"}


def layer_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def m3_imports(path: Path) -> set[str]:
    """The m3 layers a module imports (first component after ``m3.``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "m3"]
        for name in names:
            parts = name.split(".")
            if parts[0] == "m3" and len(parts) > 1 and parts[1] != "__version__":
                found.add(parts[1])
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_imports_only_the_layers_below_it(path: Path) -> None:
    layer = layer_of(path)
    if layer in ROOT_MODULES:
        return
    assert layer in ALLOWED, f"{path} is in no known layer; add it to the layer rule"
    illegal = m3_imports(path) - ALLOWED[layer] - {layer}
    assert not illegal, f"{path.relative_to(PACKAGE)} ({layer}) imports {sorted(illegal)}"


def test_nothing_but_entry_points_imports_the_gateway() -> None:
    importers = [p for p in MODULES if layer_of(p) not in {*ENTRY_POINTS, *ROOT_MODULES} and "gateway" in m3_imports(p)]
    assert importers == []


def test_nothing_imports_the_framework_integrations() -> None:
    importers = [p for p in MODULES if layer_of(p) != "integrations" and "integrations" in m3_imports(p)]
    assert importers == []


def test_the_rule_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from m3.gateway.cli import main\n    import m3.actors.system\n")
    assert m3_imports(bad) == {"gateway", "actors"}


#: Modules of m3/actors that are the actor runtime rather than an actor.
ACTOR_RUNTIME = {"__init__", "base", "bridge", "supervisor", "system", "reader"}


def defines_an_actor(path: Path) -> bool:
    """Whether the module defines (not merely imports) an M3Actor subclass."""
    module = importlib.import_module(f"m3.actors.{path.stem}")
    return any(inspect.isclass(obj) and issubclass(obj, M3Actor) and obj.__module__ == module.__name__
               for obj in vars(module).values())


@pytest.mark.parametrize("path", sorted((PACKAGE / "actors").glob("*.py")), ids=lambda p: p.stem)
def test_every_module_of_actors_is_an_actor_or_the_runtime(path: Path) -> None:
    assert path.stem in ACTOR_RUNTIME or defines_an_actor(path), (
        f"m3/actors/{path.name} defines no actor: store functions belong in m3/store/, rules in m3/retrieval/")
