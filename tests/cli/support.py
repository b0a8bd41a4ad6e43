"""Running the real ``jobbridge`` command in a subprocess, with the test's environment and no other JOBBRIDGE_*."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APP = "tests.cli.cli_app:make"


def command() -> list[str]:
    script = Path(sys.executable).with_name("jobbridge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]


def environment(variables: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without its JOBBRIDGE_* variables, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
    env.update(variables)
    return env


def jobbridge(*args: str, env: Mapping[str, str], cwd: Path = REPO, stdin: str = "",
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``jobbridge ARGS`` to the end; stdin is ``stdin`` (empty: a prompt reads end of file and aborts)."""
    return subprocess.run([*command(), *args], cwd=cwd, env=environment(env), input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)


def errors(ran: subprocess.CompletedProcess[str]) -> list[str]:
    """The ``Error: ...`` lines a run printed."""
    return [line for line in ran.stderr.splitlines() if line.startswith("Error: ")]
