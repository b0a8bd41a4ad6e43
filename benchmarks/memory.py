"""``python -m benchmarks.memory [redis|postgres|mysql|sqlite] [--jobs 1000000]``: a long-running worker's memory.

Issue 19: one worker process runs a million no-op jobs and its resident set
must not grow (under 20 MB from the 10,000th job to the last). This starts
one real ``jobbridge worker`` (default concurrency, default log level, its
output discarded), keeps its queue topped up from this process (batches of
5,000 with ``dispatch_many`` while fewer than ``--backlog`` wait), and every
half second reads the worker's ``VmRSS`` from ``/proc`` beside the number of
jobs that ran (the shared-memory probe every benchmark job reports to). It
prints a line per ``--every`` jobs and, at the end, the RSS at the 10,000th
job, at the last, the growth between them and the peak; then stops the worker
with SIGTERM. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.apps import REDIS
from benchmarks.drain import URLS, fresh
from benchmarks.probe import create_counters, total
from jobbridge import JobBridge

ROOT = Path(__file__).resolve().parent.parent
BATCH = 5_000
#: a Redis DB and key prefix of this benchmark's own: the harness flushes the jobbridge DB (8), and a run
#: takes minutes; only keys under the prefix are ever deleted here
REDIS_DB, REDIS_PREFIX = 7, "jbmem:"
#: the job count from which growth is measured (start-up, imports and caches come before it)
WARM = 10_000


def rss_kib(pid: int) -> int:
    """The process's resident set, in KiB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def run(store: str, jobs: int, backlog: int, every: int) -> list[tuple[float, int, int]]:
    """(seconds, jobs done, RSS KiB) samples of one worker running ``jobs`` jobs."""
    url = URLS[store]()
    if store == "redis":
        url = f"{REDIS}/{REDIS_DB}"
        os.environ["JB_BENCH_REDIS_PREFIX"] = REDIS_PREFIX
        _forget_prefix(url)
    else:
        fresh(store, url)
    os.environ["JB_BENCH_URL"] = url
    from benchmarks.apps.jobbridge_app import Noop, bridge

    bridge.driver().migrate()
    samples: list[tuple[float, int, int]] = []
    with tempfile.TemporaryDirectory(prefix="jb-mem-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        counts = os.path.join(tmp, "counts")
        view = create_counters(counts)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
        env.update(JB_BENCH_URL=url, JB_BENCH_COUNTS=counts)
        worker = subprocess.Popen([sys.executable, "-m", "jobbridge.cli", "worker", "-A",
                                   "benchmarks.apps.jobbridge_app:bridge"], env=env, cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            samples = _feed_and_sample(bridge, Noop, worker.pid, view, jobs, backlog, every)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
            del view
            bridge.close()
    return samples


def _forget_prefix(url: str) -> None:
    """Delete this benchmark's keys (under `REDIS_PREFIX`) and nothing else."""
    import redis

    client = redis.Redis.from_url(url)
    for key in client.scan_iter(match=f"{REDIS_PREFIX}*", count=1000):
        client.delete(key)
    client.close()


def _feed_and_sample(bridge: JobBridge, job: type, pid: int, view: memoryview, jobs: int, backlog: int,
                     every: int) -> list[tuple[float, int, int]]:
    dispatch_many = bridge.dispatch_many
    start, sent, next_sample, next_line = time.monotonic(), 0, 0.0, every
    samples: list[tuple[float, int, int]] = []
    while True:
        done = total(view)
        if sent < jobs and sent - done < backlog:
            n = min(BATCH, jobs - sent)
            dispatch_many([job() for _ in range(n)])
            sent += n
            continue
        now = time.monotonic() - start
        if now >= next_sample or done >= jobs:
            samples.append((now, done, rss_kib(pid)))
            next_sample = now + 0.5
            if done >= next_line:
                print(f"{done:>10,} jobs  {now:7.1f}s  RSS {samples[-1][2] / 1024:7.1f} MiB", flush=True)
                next_line += every
        if done >= jobs:
            return samples
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?", default="redis", choices=tuple(URLS))
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs to run (default 1,000,000)")
    parser.add_argument("--backlog", type=int, default=20_000, help="jobs kept waiting at most (default 20,000)")
    parser.add_argument("--every", type=int, default=100_000, help="print a line per this many jobs")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    samples = run(args.store, args.jobs, args.backlog, args.every)
    warm = next(s for s in samples if s[1] >= WARM)
    last = samples[-1]
    peak = max(s[2] for s in samples if s[1] >= WARM)
    print(f"{args.store}: {last[1]:,} jobs in {last[0]:.0f}s ({last[1] / last[0]:,.0f} jobs/s, load average "
          f"{load:.2f} -> {os.getloadavg()[0]:.2f})")
    print(f"RSS at job {warm[1]:,}: {warm[2] / 1024:.1f} MiB; at job {last[1]:,}: {last[2] / 1024:.1f} MiB; "
          f"growth {(last[2] - warm[2]) / 1024:+.1f} MiB; peak after job {WARM:,}: {peak / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
