"""Racing child processes: start them all, let each connect, then release them together.

Each child runs ``python -c SCRIPT ARGS…``, prints ``ready`` once it is set up, waits for a line on
stdin, does its work and exits. Starting the work only when every child is ready makes the race real.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence


def race(script: str, argv: Sequence[Sequence[str]], env: dict[str, str], timeout: float
         ) -> list[tuple[int, str, str]]:
    """Run one child per entry of ``argv`` together; (returncode, stdout, stderr) of each, in order."""
    children = [subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for args in argv]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready", child.stderr.read() if child.stderr else ""
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outputs = [child.communicate(timeout=timeout) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return [(child.returncode, out, err) for child, (out, err) in zip(children, outputs, strict=True)]
