"""The pass registry builds the passes that are registered and switched on, each in its loop actor."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from sqlalchemy import Connection

from m3.cognition import registry
from m3.cognition.passes import PASS_NAMES, PassContext, PassStep
from m3.config import Config, load_config


class Named:
    """A pass that does nothing, under the name it is built with."""

    name: ClassVar[str] = ""

    def step(self, conn: Connection, ctx: PassContext) -> PassStep:
        return PassStep(seen=0)

    def produced(self, replies: Sequence[Any]) -> int:
        return 0


def factory(pass_name: str) -> registry.PassFactory:
    return lambda config: type(f"Pass_{pass_name}", (Named,), {"name": pass_name})()


@pytest.fixture
def config(m3_home: Path) -> Config:
    """The defaults (no store is touched: building passes only reads settings)."""
    return load_config({"M3_HOME": str(m3_home)})


ALL = {name: factory(name) for name in PASS_NAMES}


def names(built: dict[str, tuple[Any, ...]]) -> dict[str, list[str]]:
    return {actor: [one.name for one in passes] for actor, passes in built.items()}


def test_every_pass_is_registered_and_by_default_all_but_rollup_run(config: Config) -> None:
    assert sorted(registry.FACTORIES) == sorted(PASS_NAMES)
    assert names(registry.build_passes(config)) == {"observer": ["observe"], "reflector": ["reflect", "decay"]}


def test_registered_passes_run_in_their_actor_and_rollup_is_opt_in(config: Config) -> None:
    assert names(registry.build_passes(config, ALL)) == {"observer": ["observe"], "reflector": ["reflect", "decay"]}
    opted = config.with_overrides(loop__rollup__enabled=True, loop__decay__enabled=False)
    assert names(registry.build_passes(opted, ALL)) == {"observer": ["observe", "rollup"], "reflector": ["reflect"]}


def test_the_loop_switch_stops_ticks_only_so_run_once_still_has_the_passes(config: Config) -> None:
    off = config.with_overrides(loop__enabled=False)
    assert names(registry.build_passes(off, ALL))["reflector"] == ["reflect", "decay"]


def test_a_pass_gets_its_own_settings_without_the_prefix(config: Config) -> None:
    decay = registry.pass_settings(config, "decay")
    assert decay["enabled"] is True and decay["half_life_days"] == config["loop.decay.half_life_days"]
    assert not any(key.startswith("loop.") for key in decay)
    assert registry.pass_settings(config, "nothing") == {}
