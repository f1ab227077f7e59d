"""The governor judges ticks from injected probes: the Writer's count, the load per core, monotonic time."""

from __future__ import annotations

from m3.cognition.governor import Governor, load_per_core


class Probes:
    def __init__(self) -> None:
        self.writes, self.own, self.load, self.now = 0, 0, 0.0, 100.0


def governor(probes: Probes, *, max_writes_per_s: float = 50.0, max_load: float = 0.9) -> Governor:
    return Governor(max_writes_per_s=max_writes_per_s, max_load=max_load, writes=lambda: probes.writes,
                    own=lambda: probes.own, load=lambda: probes.load, clock=lambda: probes.now)


def test_a_quiet_idle_machine_lets_the_tick_run() -> None:
    probes = Probes()
    judged = governor(probes)
    probes.writes, probes.now = 100, 110.0  # 10/s
    verdict = judged.check()
    assert verdict.run and verdict.reason is None and verdict.writes_per_s == 10.0


def test_a_write_rate_above_the_limit_defers_and_the_next_window_starts_at_the_check() -> None:
    probes = Probes()
    judged = governor(probes)
    probes.writes, probes.now = 600, 110.0  # 60/s
    burst = judged.check()
    assert not burst.run and "writing 60.0 requests/s" in (burst.reason or "")
    probes.now = 120.0  # no write since that check
    assert judged.check().run


def test_the_loops_own_commits_do_not_count_as_agents_writing() -> None:
    probes = Probes()
    judged = governor(probes)
    probes.writes, probes.own, probes.now = 600, 590, 110.0
    assert judged.check().writes_per_s == 1.0


def test_load_per_core_above_the_limit_defers() -> None:
    probes = Probes()
    judged = governor(probes)
    probes.load = 1.2
    verdict = judged.check()
    assert not verdict.run and "busy: load 1.20 per core" in (verdict.reason or "")


def test_a_limit_of_zero_turns_its_check_off() -> None:
    probes = Probes()
    judged = governor(probes, max_writes_per_s=0, max_load=0)
    probes.writes, probes.load, probes.now = 10**6, 50.0, 101.0
    assert judged.check().run


def test_peek_does_not_start_a_new_window() -> None:
    probes = Probes()
    judged = governor(probes)
    probes.writes, probes.now = 1000, 110.0
    assert not judged.peek().run
    assert not judged.check().run  # the burst peek saw is still in the window check judges


def test_the_real_load_probe_is_a_share_per_core() -> None:
    assert load_per_core() >= 0.0
