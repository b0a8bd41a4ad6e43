"""The benchmark venv: the peers beside an editable jobbridge, kept apart from the project's .venv.

The peers' pins clash with the project's (arq wants redis<6, the project tests
against redis 8), so they live in their own venv — ``/tmp/jb-bench-venv`` by
default, ``--venv`` or ``JB_BENCH_VENV`` to choose another — created on first
use and reinstalled when requirements-peers.txt changes. The harness then
re-executes itself there, so that jobbridge and every peer run in the same run,
on the same interpreter and the same redis-py. When the venv cannot be made,
the run goes on in the current interpreter and each missing peer's row says why.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.common import ROOT

REQUIREMENTS = Path(__file__).with_name("requirements-peers.txt")
DEFAULT = Path(os.environ.get("JB_BENCH_VENV", "/tmp/jb-bench-venv"))
MARKER = "JB_BENCH_IN_VENV"


def _fingerprint() -> str:
    data = REQUIREMENTS.read_bytes() + (ROOT / "pyproject.toml").read_bytes()
    return hashlib.sha256(data).hexdigest()[:16]


def ensure(venv: Path) -> str | None:
    """Create or update ``venv``; None when it is ready, else why it is not."""
    python = venv / "bin" / "python"
    stamp = venv / ".jb-bench-installed"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == _fingerprint():
        return None
    print(f"benchmarks: preparing the peers' venv at {venv} (once; a few minutes)", file=sys.stderr, flush=True)
    steps = []
    if not python.exists():
        steps.append([sys.executable, "-m", "venv", str(venv)])
    steps += [
        [str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
        [str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[postgres,mysql,redis,amqp,otel,sentry,prometheus]"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            return f"`{' '.join(step[-3:])}` failed: {tail}"
    stamp.write_text(_fingerprint())
    return None


def reexec(venv: Path, argv: list[str]) -> str | None:
    """Run the harness again inside ``venv`` (does not return), or say why it cannot."""
    if os.environ.get(MARKER) == "1":
        return None
    problem = ensure(venv)
    if problem is not None:
        return problem
    env = dict(os.environ, **{MARKER: "1"})
    python = str(venv / "bin" / "python")
    os.execve(python, [python, "-m", "benchmarks", *argv], env)
    return None  # unreachable
