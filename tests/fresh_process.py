"""`fresh_process`: run one test in an interpreter of its own, a pytest run of that test alone.

For tests whose subject is interpreter-wide state that the tests before them in
a shared worker process may have changed. The wake's landing tests run under
`sys.settrace` with opcode events, and CPython 3.11 spins for good in a traced
frame once an asynchronous exception was ever raised in the process (the
watchdog tests raise them): such a test passes alone and hangs after those.
The child runs with ``-s``, so a hang's `faulthandler` traceback reaches the
failure message.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
#: set in the child to the node id it runs; the wrapped test runs its body only there
ENV = "JOBBRIDGE_FRESH_TEST"

F = TypeVar("F", bound=Callable[..., None])


def runs_elsewhere(test: Callable[..., object]) -> bool:
    """Whether ``test`` is a `fresh_process` test and this process only starts the one that runs it."""
    return getattr(test, "_fresh_process", False) and ENV not in os.environ


def fresh_process(test: F) -> F:
    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        nodeid = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        if os.environ.get(ENV) == nodeid:
            test(*args, **kwargs)
            return
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:xdist", nodeid],
                              cwd=ROOT, env={**os.environ, ENV: nodeid}, capture_output=True, text=True,
                              timeout=300, check=False)
        assert proc.returncode == 0, f"{nodeid} in a fresh process:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"

    wrapper._fresh_process = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
