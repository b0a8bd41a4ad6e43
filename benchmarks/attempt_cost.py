"""``python -m benchmarks.attempt_cost [--hook none|pass|prometheus]``: one attempt's instructions, under callgrind.

What the worker's threads do per job, without the store and the loop: one
`Executor.run` of a no-op job (memory driver, ``-l warning``), repeated
``small`` and ``large`` times in one thread of a child run under ``valgrind
--tool=callgrind``; instructions per attempt = the difference / (large -
small), start-up cancelled out. ``--hook pass`` adds an attempt hook that
only calls on (what the hook chain itself costs), ``--hook prometheus`` the
Prometheus integration's. Prints one line; nothing is asserted.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def attempts(hook: str, count: int) -> None:
    """The child: ``count`` attempts of one no-op job."""
    import logging

    from jobbridge import Job, JobBridge, JobContext, Settings, telemetry_hooks
    from jobbridge.envelope import Reservation

    class Noop(Job, name="bench.attempt-noop"):
        def handle(self, ctx: JobContext) -> None:
            return None

    bridge = JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[Noop])
    executor = bridge.executor()
    res = Reservation(bridge.envelope(Noop()).replace(attempts=1), None, float("inf"))
    logging.getLogger("jobbridge").setLevel(logging.WARNING)
    if hook == "pass":
        telemetry_hooks.ATTEMPT_HOOKS.append(lambda executor, res, run: run())
    elif hook == "prometheus":
        from jobbridge.integrations import prometheus

        prometheus.instrument()
    for _ in range(count):
        executor.run(res)


def counted(hook: str, count: int) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
           "benchmarks.attempt_cost", "--child", str(count), "--hook", hook]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    found = COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr[-2000:]}")
    return int(found[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.attempt_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--hook", choices=("none", "pass", "prometheus"), default="none")
    parser.add_argument("--attempts", default="1000,5000", help="two counts, comma-separated (default 1000,5000)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        attempts(args.hook, args.child)
        return
    small, large = sorted(int(n) for n in args.attempts.split(","))
    per = (counted(args.hook, large) - counted(args.hook, small)) / (large - small)
    print(f"hook {args.hook}: {per:,.0f} instructions per attempt")


if __name__ == "__main__":
    main()
