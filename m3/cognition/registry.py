"""Which passes of the cognitive loop run, and in which loop actor (docs/cognitive-loop.md).

Each pass's owner adds one entry to :data:`FACTORIES`: its name (one of :data:`~m3.cognition.passes.PASS_NAMES`)
and a function that builds it from the :class:`~m3.config.Config`. A pass runs when it is registered and its own
switch is on (``loop.<name>.enabled``); ``loop.enabled`` off stops the ticks only (``loop_run_once`` still runs
the passes). The ``observer`` actor runs observe and rollup, the ``reflector`` actor reflect and decay, each in
``PASS_NAMES`` order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from m3.cognition.decay import DecayPass
from m3.cognition.observer import ObservePass
from m3.cognition.passes import PASS_NAMES, LoopPass
from m3.cognition.reflector import ReflectPass
from m3.cognition.rollup import RollupPass
from m3.config import SETTINGS, Config

#: Builds one pass from the configuration.
PassFactory = Callable[[Config], LoopPass]

#: The loop actors, each with the passes it may run (a pass of another name runs in the first of them).
LOOP_ACTORS: dict[str, tuple[str, ...]] = {"observer": ("observe", "rollup"), "reflector": ("reflect", "decay")}

#: The registered passes, by name: a function of the configuration that builds each (the passes read their
#: ``loop.<name>.*`` settings from ``PassContext.settings`` at every tick, so most ignore it).
FACTORIES: dict[str, PassFactory] = {
    "observe": lambda _config: ObservePass(),
    "reflect": lambda _config: ReflectPass(),
    "decay": lambda _config: DecayPass(),
    "rollup": RollupPass.from_config,
}


def actor_of(name: str) -> str:
    """The loop actor that runs pass ``name``."""
    return next((actor for actor, names in LOOP_ACTORS.items() if name in names), next(iter(LOOP_ACTORS)))


def switched_on(config: Config, name: str) -> bool:
    """Whether the pass's own ``loop.<name>.enabled`` is on (a pass without such a setting is always on)."""
    key = f"loop.{name}.enabled"
    return bool(config[key]) if any(s.key == key for s in SETTINGS) else True


def pass_settings(config: Config, name: str) -> dict[str, Any]:
    """The pass's own settings, ``loop.<name>.*`` without the prefix (what :class:`PassContext` carries)."""
    prefix = f"loop.{name}."
    return {s.key.removeprefix(prefix): config[s.key] for s in SETTINGS if s.key.startswith(prefix)}


def build_passes(config: Config, factories: Mapping[str, PassFactory] | None = None) -> dict[str, tuple[LoopPass, ...]]:
    """The passes to run, per loop actor (every actor is a key, maybe with no pass), registered ones only."""
    found = FACTORIES if factories is None else factories
    order = {name: i for i, name in enumerate(PASS_NAMES)}
    chosen: dict[str, list[LoopPass]] = {actor: [] for actor in LOOP_ACTORS}
    for name in sorted(found, key=lambda n: (order.get(n, len(order)), n)):
        if switched_on(config, name):
            chosen[actor_of(name)].append(found[name](config))
    return {actor: tuple(passes) for actor, passes in chosen.items()}


def placed(passes: Mapping[str, tuple[LoopPass, ...]] | tuple[LoopPass, ...]) -> dict[str, tuple[LoopPass, ...]]:
    """Passes given as one tuple (tests, embedders) placed in their actors by name; a mapping is kept as given."""
    if isinstance(passes, Mapping):
        return {actor: tuple(passes.get(actor, ())) for actor in LOOP_ACTORS}
    chosen: dict[str, list[LoopPass]] = {actor: [] for actor in LOOP_ACTORS}
    for one in passes:
        chosen[actor_of(one.name)].append(one)
    return {actor: tuple(found) for actor, found in chosen.items()}
