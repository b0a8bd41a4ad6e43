"""`python -m benchmarks.driver_loop` drains every queued job through the driver alone, in a process of its own.

Run on SQLite (the store that needs no server; the benchmark's own file under
/tmp/jb-bench), with a count that is not a multiple of the batch, so the last,
short claim is made too. Only the count is asserted: the rates belong to the
benchmarks.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_driver_loop_drains_every_job() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.driver_loop", "sqlite", "--jobs", "300", "--batch", "64"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.match(r"sqlite: 300 jobs in [0-9.]+s = [0-9,]+ jobs/s; client [0-9.]+ us CPU per job", done.stdout)
