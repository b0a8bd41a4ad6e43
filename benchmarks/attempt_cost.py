"""``python -m benchmarks.attempt_cost [--hook none|pass|prometheus] [-l warning|info]``: one attempt's instructions.

What the worker's threads do per job, without the store and the loop: one
`Executor.run` of a no-op job (memory driver, ``-l warning``), repeated
``small`` and ``large`` times in one thread of a child run under ``valgrind
--tool=callgrind``; instructions per attempt = the difference / (large -
small), start-up cancelled out. ``--hook pass`` adds an attempt hook that
only calls on (what the hook chain itself costs), ``--hook prometheus`` the
Prometheus integration's. ``--loglevel info`` logs each attempt's line as a
worker at its default level does: through the handler the worker installs
(`jobbridge.log_output.install_default_handler`), writing to ``/dev/null``, its
writer waking every 5 s instead of 50 ms (under callgrind a run is about 50
times slower, and 5 s gives the batches a real worker's 50 ms gives); the
difference from ``--loglevel warning`` is what the line costs. Prints one
line; nothing is asserted.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def attempts(hook: str, count: int, loglevel: str = "warning") -> None:
    """The child: ``count`` attempts of one no-op job."""
    import logging
    import os

    from jobbridge import Job, JobBridge, JobContext, Settings, log_output, telemetry_hooks
    from jobbridge.envelope import Reservation

    class Noop(Job, name="bench.attempt-noop"):
        def handle(self, ctx: JobContext) -> None:
            return None

    bridge = JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[Noop])
    executor = bridge.executor()
    res = Reservation(bridge.envelope(Noop()).replace(attempts=1), None, float("inf"))
    if loglevel == "info":
        log_output.install_default_handler(logging.INFO)
    else:
        logging.getLogger("jobbridge").setLevel(logging.WARNING)
    if hook == "pass":
        telemetry_hooks.ATTEMPT_HOOKS.append(lambda executor, res, run: run())
    elif hook == "prometheus":
        from jobbridge.integrations import prometheus

        prometheus.instrument()
    with open(os.devnull, "w") as sink:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, log_output.BatchedStreamHandler):
                handler.setStream(sink)
                handler.interval = 5.0
        for _ in range(count):
            executor.run(res)
        log_output.flush_log_output()  # every line written, while the sink is open


def counted(hook: str, count: int, loglevel: str = "warning") -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
           "benchmarks.attempt_cost", "--child", str(count), "--hook", hook, "--loglevel", loglevel]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    found = COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr[-2000:]}")
    return int(found[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.attempt_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--hook", choices=("none", "pass", "prometheus"), default="none")
    parser.add_argument("-l", "--loglevel", choices=("warning", "info"), default="warning",
                        help="info: each attempt logs its line through the worker's default handler")
    parser.add_argument("--attempts", default="1000,5000", help="two counts, comma-separated (default 1000,5000)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        attempts(args.hook, args.child, args.loglevel)
        return
    small, large = sorted(int(n) for n in args.attempts.split(","))
    per = (counted(args.hook, large, args.loglevel) - counted(args.hook, small, args.loglevel)) / (large - small)
    print(f"hook {args.hook}, -l {args.loglevel}: {per:,.0f} instructions per attempt")


if __name__ == "__main__":
    main()
