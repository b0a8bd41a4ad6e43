"""``python -m benchmarks.telemetry_cost [--jobs 1000,5000]``: what telemetry costs a worker, in instructions.

On a shared, loaded machine a rate moves with the neighbours' work; the
number of instructions a worker executes to drain a queue does not (much). So
this runs the real ``jobbridge worker --stop-when-empty -l warning`` under
``valgrind --tool=callgrind`` on SQLite, once per queue size and per app:

- ``bare``: the same app and store, the worker run in-process by `bare_worker`
  without its monitor thread (no heartbeat, no per-minute counts): what the
  monitor costs is plain's figure over this one;
- ``plain``: `benchmarks.apps.jobbridge_app` (the heartbeat is always on);
- ``metrics``: the same with ``--metrics-port`` on 127.0.0.1 (Prometheus);
- ``all``: `benchmarks.apps.jobbridge_telemetry_app` (OpenTelemetry with a
  batch span processor, Sentry with a local transport) and ``--metrics-port``.

Two queue sizes, so that start-up (imports, connections, the SDKs' set-up)
cancels out: instructions per job = (I(large) - I(small)) / (large - small).
The cost is an app's instructions per job over plain's, minus one. ``--apps``
runs some of them (``--apps plain --apps all``); ``--parallel`` runs the
workers side by side. Every worker runs with its reservation batches pinned
at their largest (`jobbridge.worker_window.PREFETCH_MS` raised): the worker sizes a
batch by how long attempts take on the clock, and under callgrind on a loaded
machine that varies from run to run, and with it the per-batch share of each
job's instructions (a run at load 12 counted one configuration 25 % above a
run of the same code at load 5). Prints a
table; nothing is asserted. ``--concurrency`` (default 1) keeps the threads'
interleaving, and with it the count, steady.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.probe import create_counters
from benchmarks.run_jobbridge import free_port

#: app -> (what -A names, whether the worker serves --metrics-port); "bare" runs `bare_worker` instead
APPS = {"bare": ("benchmarks.apps.jobbridge_app:bridge", False),
        "plain": ("benchmarks.apps.jobbridge_app:bridge", False),
        "metrics": ("benchmarks.apps.jobbridge_app:bridge", True),
        "all": ("benchmarks.apps.jobbridge_telemetry_app:bridge", True)}
ROOT = Path(__file__).resolve().parent.parent
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def _queue(url: str, env: dict[str, str], jobs: int) -> None:
    """Fill a fresh store with ``jobs`` no-op jobs (in a child, so this process never imports the app)."""
    code = ("from benchmarks.apps.jobbridge_app import bridge, Noop\n"
            "bridge.driver().migrate()\n"
            f"bridge.dispatch_many([Noop() for _ in range({jobs})])\n")
    subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True)


def instructions(app: str, jobs: int, concurrency: int, work: Path) -> tuple[int, float]:
    """Instructions callgrind counted (every thread) while a worker drained ``jobs``; and its wall seconds."""
    store = work / f"{app}-{jobs}.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    counts = work / "counts"
    create_counters(str(counts))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBBRIDGE_", "OTEL_", "SENTRY_"))}
    env.update(JB_BENCH_URL=f"sqlite:///{store}", JB_BENCH_COUNTS=str(counts), PYTHONHASHSEED="0")
    _queue(env["JB_BENCH_URL"], env, jobs)
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work / f'{app}-{jobs}.out'}", sys.executable]
    cmd += ["-m", "benchmarks.telemetry_cost"]
    if app == "bare":
        cmd += ["--bare-worker", "--concurrency", str(concurrency)]
    else:
        cmd += ["--cli-worker", "worker", "-A", APPS[app][0], "--stop-when-empty",
                "-l", "warning", "--concurrency", str(concurrency)]
    if APPS[app][1]:
        cmd += ["--metrics-port", str(free_port())]
    start = time.monotonic()
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - start
    found = COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"{app} x {jobs}: exit {done.returncode}: {done.stderr[-2000:]}")
    return int(found[-1]), seconds


def _pin_batches() -> None:
    """Reserve as far ahead as the worker ever does, whatever attempts take on the clock (see above)."""
    import jobbridge.worker_window

    jobbridge.worker_window.PREFETCH_MS = 1e9


def cli_worker(argv: list[str]) -> None:
    """``jobbridge ARGV`` in this process, its batches pinned."""
    _pin_batches()
    from jobbridge.cli import main

    main(argv)


def bare_worker(concurrency: int) -> None:
    """Drain the queue as ``jobbridge worker --stop-when-empty -l warning`` would, without the monitor thread."""
    import logging

    from benchmarks.apps.jobbridge_app import bridge
    from jobbridge.worker import Worker, WorkerOptions

    _pin_batches()
    logging.basicConfig(level=logging.WARNING)
    Worker(bridge, WorkerOptions(concurrency=concurrency, stop_when_empty=True)).run()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.telemetry_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="1000,5000", help="two queue sizes, comma-separated (default 1000,5000)")
    parser.add_argument("--concurrency", type=int, default=1, help="the worker's threads (default 1)")
    parser.add_argument("--apps", action="append", choices=tuple(APPS), help="which (default: all four)")
    parser.add_argument("--parallel", action="store_true", help="run the workers at once")
    parser.add_argument("--bare-worker", action="store_true", help=argparse.SUPPRESS)  # the "bare" app's worker
    parser.add_argument("--cli-worker", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)  # the others' worker
    args = parser.parse_args()
    if args.cli_worker is not None:
        cli_worker(args.cli_worker)
        return
    if args.bare_worker:
        bare_worker(args.concurrency)
        return
    small, large = sorted(int(n) for n in args.jobs.split(","))
    apps = args.apps or list(APPS)
    runs = [(app, jobs) for app in apps for jobs in (small, large)]
    with tempfile.TemporaryDirectory(prefix="jb-callgrind-") as tmp, \
            ThreadPoolExecutor(len(runs) if args.parallel else 1) as pool:
        work = Path(tmp)
        counted = dict(zip(runs, pool.map(lambda run: instructions(run[0], run[1], args.concurrency, work), runs),
                           strict=True))
    print(f"{'app':<10} {'jobs':>6} {'instructions':>16} {'wall s':>8}")
    for (app, jobs), (count, seconds) in counted.items():
        print(f"{app:<10} {jobs:>6} {count:>16,} {seconds:>8.1f}")
    per_job = {app: (counted[app, large][0] - counted[app, small][0]) / (large - small) for app in apps}
    print()
    base = "bare" if "bare" in per_job else "plain"
    for app, value in per_job.items():
        cost = f"  {value / per_job[base] - 1:+.1%} over {base}" if base in per_job and app != base else ""
        print(f"{app:<10} {value:>12,.0f} instructions per job{cost}")


if __name__ == "__main__":
    main()
