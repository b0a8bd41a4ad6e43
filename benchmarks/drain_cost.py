"""``python -m benchmarks.drain_cost [STORE] [--jobs 2000,10000] [--async] [-l LEVEL]``: a drain's instructions per job.

What `benchmarks.drain STORE` times, counted instead: the real ``jobbridge
worker --stop-when-empty`` at its default concurrency (or ``--concurrency``)
draining queued no-op jobs from Redis (the default), PostgreSQL, MariaDB or
SQLite (the benchmarks' store of each), run under
``valgrind --tool=callgrind`` once per queue size; instructions per job =
(I(large) - I(small)) / (large - small), start-up cancelled out. Only the
worker process is counted, not the server. As in `benchmarks.telemetry_cost`, the
reservation batches are pinned at their largest (`jobbridge.worker_window.PREFETCH_MS`
raised), so that the count does not move with how long attempts take on a
loaded machine's clock. Prints one line; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.drain import URLS, fill, fresh
from benchmarks.probe import create_counters, total

ROOT = Path(__file__).resolve().parent.parent
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def counted(store: str, jobs: int, job: str, level: str, concurrency: int | None) -> int:
    """Instructions of one worker process draining ``jobs`` queued ``job``s (every thread)."""
    url = URLS[store]()
    fresh(store, url)
    with tempfile.TemporaryDirectory(prefix="jb-drain-cost-") as tmp:
        counts = os.path.join(tmp, "counts")
        view = create_counters(counts)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
        env.update(JB_BENCH_URL=url, JB_BENCH_COUNTS=counts, PYTHONHASHSEED="0")
        fill(url, jobs, job, env)
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
               "benchmarks.drain_cost", "--child", "worker", "-A", "benchmarks.apps.jobbridge_app:bridge",
               "--stop-when-empty", "-l", level]
        if concurrency is not None:
            cmd += ["--concurrency", str(concurrency)]
        done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
        ran = total(view)
        del view
    found = COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found or ran != jobs:
        raise RuntimeError(f"{jobs} jobs (ran {ran}): exit {done.returncode}: {done.stderr[-2000:]}")
    return int(found[-1])


def child(argv: list[str]) -> None:
    """``jobbridge ARGV`` in this process, the worker's batches pinned at their largest."""
    import jobbridge.worker_window

    jobbridge.worker_window.PREFETCH_MS = 1e9
    from jobbridge.cli import main as cli

    cli(argv)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.drain_cost", description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?", default="redis", choices=tuple(URLS), help="the store (default redis)")
    parser.add_argument("--jobs", default="2000,10000", help="two queue sizes, comma-separated (default 2000,10000)")
    parser.add_argument("--async", dest="use_async", action="store_true", help="async def handle no-op jobs")
    parser.add_argument("-l", "--loglevel", default="warning", help="the worker's -l (default warning)")
    parser.add_argument("--concurrency", type=int, help="the worker's threads (default: its own)")
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    small, large = sorted(int(n) for n in args.jobs.split(","))
    job = "AsyncNoop" if args.use_async else "Noop"
    low, high = (counted(args.store, n, job, args.loglevel, args.concurrency) for n in (small, large))
    print(f"{args.store} {job} -l {args.loglevel}: {(high - low) / (large - small):,.0f} instructions per job "
          f"({low:,} at {small:,} jobs, {high:,} at {large:,})")


if __name__ == "__main__":
    main()
