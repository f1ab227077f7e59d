"""Settings nested one level deeper than ``[section]`` (``[loop.governor]``) read from m3_config.toml."""

from __future__ import annotations

from pathlib import Path

from m3.config import load_config


def test_a_nested_table_and_a_dotted_key_both_set_three_part_settings(m3_home: Path) -> None:
    first = load_config({"M3_HOME": str(m3_home)})
    first.file.parent.mkdir(parents=True, exist_ok=True)
    first.file.write_text("[loop]\nbudget = 7\nrollup.enabled = true\n\n[loop.governor]\nmax_load = 2.5\n",
                          encoding="utf-8")
    read = load_config({"M3_HOME": str(m3_home)})
    assert (read["loop.budget"], read["loop.rollup.enabled"], read["loop.governor.max_load"]) == (7, True, 2.5)
    assert read["loop.governor.max_writes_per_s"] == 50.0  # the default beside it
    origins = {row["key"]: row["origin"] for row in read.rows()}
    assert origins["loop.governor.max_load"] == "file"


def test_the_loop_settings_come_from_the_environment_too(m3_home: Path) -> None:
    read = load_config({"M3_HOME": str(m3_home), "M3_LOOP_GOVERNOR_MAX_WRITES_PER_S": "0",
                        "M3_LOOP_DECAY_ENABLED": "false"})
    assert (read["loop.governor.max_writes_per_s"], read["loop.decay.enabled"]) == (0.0, False)
