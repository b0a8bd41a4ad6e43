"""``python -m benchmarks.drain redis|postgres|mysql|sqlite [--jobs N] [--async] [-l LEVEL]``: one worker, one store.

The quick measurement beside the full harness (`python -m benchmarks`): fill a
fresh store with ``--jobs`` no-op jobs, then time one real ``jobbridge worker
--stop-when-empty`` process at its default concurrency and log level (or
``-l``) draining them, start-up included. Prints jobs/s, the worker's CPU
seconds (user + system, from its rusage) and jobs per CPU-second, and the load
average before and after: on a shared machine the rate moves with the
neighbours, jobs per CPU-second much less. ``--async`` queues the app's
``async def handle`` no-op instead. ``--repeat`` runs it again on a fresh
fill. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.apps import redis_url
from benchmarks.bytecode import compile_sources
from benchmarks.probe import create_counters, total
from benchmarks.stores import (
    BENCH_DB,
    drop_jobbridge_tables,
    ensure_mysql_database,
    ensure_pg_database,
    flush_redis_db,
    fresh_sqlite,
    mysql_url,
    pg_url,
    sqlite_url,
)

ROOT = Path(__file__).resolve().parent.parent
URLS = {"redis": lambda: redis_url("jobbridge"), "postgres": pg_url, "mysql": mysql_url, "sqlite": sqlite_url}


def fresh(store: str, url: str) -> None:
    """An empty store with jobbridge's current schema."""
    if store == "redis":
        flush_redis_db(url)
    elif store == "sqlite":
        fresh_sqlite()
    else:
        (ensure_pg_database if store == "postgres" else ensure_mysql_database)(BENCH_DB)
        drop_jobbridge_tables(url)


def fill(url: str, jobs: int, job: str, env: dict[str, str]) -> None:
    """Queue ``jobs`` no-op jobs, in a child (this process never imports the app)."""
    code = ("import sys\nfrom benchmarks.apps import jobbridge_app as app\n"
            "app.bridge.driver().migrate()\nn = int(sys.argv[1])\n"
            "for at in range(0, n, 5000):\n"
            f"    app.bridge.dispatch_many([app.{job}() for _ in range(min(5000, n - at))])\n")
    subprocess.run([sys.executable, "-c", code, str(jobs)], env=env, cwd=ROOT, check=True)


def drain(store: str, jobs: int, *, job: str = "Noop", level: str | None = None,
          extra: tuple[str, ...] = ()) -> dict[str, float]:
    """One fill and one timed drain: the figures `main` prints."""
    url = URLS[store]()
    fresh(store, url)
    with tempfile.TemporaryDirectory(prefix="jb-drain-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        counts = os.path.join(tmp, "counts")
        view = create_counters(counts)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
        env.update(JB_BENCH_URL=url, JB_BENCH_COUNTS=counts)
        fill(url, jobs, job, env)
        cmd = [sys.executable, "-m", "jobbridge.cli", "worker", "-A", "benchmarks.apps.jobbridge_app:bridge",
               "--stop-when-empty", *(["-l", level] if level else []), *extra]
        load = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        ran = total(view)
        del view
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"jobs": ran, "seconds": seconds, "rate": ran / seconds, "cpu": cpu, "per_cpu": ran / cpu,
            "load_before": load, "load_after": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.drain", description=__doc__.splitlines()[0])
    parser.add_argument("store", choices=tuple(URLS))
    parser.add_argument("--jobs", type=int, default=20_000, help="no-op jobs to drain (default 20,000)")
    parser.add_argument("--async", dest="use_async", action="store_true", help="async def handle no-op jobs")
    parser.add_argument("-l", "--loglevel", help="the worker's -l (default: its own, INFO)")
    parser.add_argument("--repeat", type=int, default=1, help="runs, each on a fresh fill (default 1)")
    args, extra = parser.parse_known_args()
    job = "AsyncNoop" if args.use_async else "Noop"
    compile_sources()  # benchmarks/bytecode.py says why
    for _ in range(args.repeat):
        got = drain(args.store, args.jobs, job=job, level=args.loglevel, extra=tuple(extra))
        print(f"{args.store} {job} -l {args.loglevel or 'info'}: {got['jobs']:,.0f} jobs in {got['seconds']:.2f}s = "
              f"{got['rate']:,.0f} jobs/s; {got['cpu']:.2f} CPU-s = {got['per_cpu']:,.0f} jobs/CPU-s; "
              f"load average {got['load_before']:.2f} -> {got['load_after']:.2f}", flush=True)


if __name__ == "__main__":
    main()
