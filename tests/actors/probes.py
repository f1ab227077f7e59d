"""A small real actor for supervision and bridge tests: it echoes, fails, blocks and crashes on request.

It runs on the same base class, handle and mailbox as m3's own actors; only
its handlers are test-made, so that a crash or a slow answer can be caused
at a precise moment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from m3.actors.base import M3Actor
from m3.errors import InvalidArgument
from m3.protocols.base import Message

WAIT_S = 10.0


class Echo(Message):
    value: int


class Fail(Message):
    """A request whose handler raises (an M3 error when ``coded``)."""

    coded: bool = True


class Boom(Message):
    """An event whose handler raises: without a waiting caller, the actor crashes."""


class Block(Message):
    """Handled only once the probe's ``gate`` opens; answers True."""


@dataclass
class Probe:
    """What the test controls and observes, shared by every incarnation of the actor."""

    gate: threading.Event = field(default_factory=threading.Event)
    blocked: threading.Event = field(default_factory=threading.Event)
    starts: list[float] = field(default_factory=list)
    crashes: list[float] = field(default_factory=list)
    #: Fail this many setups before one succeeds.
    setup_failures: int = 0
    #: When set, the next release() signals ``releasing`` and waits for ``release_gate``.
    hold_next_release: bool = False
    releasing: threading.Event = field(default_factory=threading.Event)
    release_gate: threading.Event = field(default_factory=threading.Event)
    #: When set, the next release() raises.
    break_next_release: bool = False


class ProbeActor(M3Actor):
    def __init__(self, *, probe: Probe, **base: Any):
        super().__init__(**base)
        self.probe = probe

    def setup(self) -> None:
        if self.probe.setup_failures > 0:
            self.probe.setup_failures -= 1
            raise RuntimeError("setup failed on purpose")
        self.probe.starts.append(time.monotonic())

    def release(self) -> None:
        if self.probe.break_next_release:
            self.probe.break_next_release = False
            raise OSError("closing failed on purpose")
        if self.probe.hold_next_release:
            self.probe.hold_next_release = False
            self.probe.releasing.set()
            self.probe.release_gate.wait(WAIT_S)

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {Echo: lambda m: m.value, Fail: self._fail, Boom: self._boom, Block: self._block}

    def _fail(self, msg: Fail) -> None:
        if msg.coded:
            raise InvalidArgument("failed on purpose")
        raise RuntimeError("failed on purpose")

    def _boom(self, _msg: Boom) -> None:
        self.probe.crashes.append(time.monotonic())
        raise RuntimeError("crashed on purpose")

    def _block(self, _msg: Block) -> bool:
        self.probe.blocked.set()
        return self.probe.gate.wait(WAIT_S)
