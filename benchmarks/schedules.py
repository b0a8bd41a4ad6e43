"""``python -m benchmarks.schedules postgres|redis``: one scheduler firing 10,000 entries.

Not a test: it prints figures and asserts none. 10,000 ``every=60`` entries
(the worst case: every one of them falls due at the same instant, each minute)
on a fresh store; one `Scheduler` runs in a thread for ``--minutes`` of real
time. Measured:

- scheduler CPU seconds per minute (this process's CPU time: the main thread
  only waits, so it is the scheduler's, and its driver's client's);
- tick-to-dispatch delay, p50/p99/max: from a tick's instant to the return of
  the store call that recorded it and pushed its job (committed: a worker's
  reserve sees it), both instants read off the store's clock, the one the
  scheduler judges ticks by. At the end the queue's ready jobs are counted: every
  tick counted as dispatched must be there, ready now, not delayed.

The host's load average is printed with the figures: on a shared machine the
scheduler's share of a core, not only its code, decides the delay.

Options: ``--entries N`` (default 10,000), ``--minutes M`` (default 2).
Servers: ``JB_BENCH_PG`` (default postgresql://postgres@127.0.0.1:5432, database
jobbridge_bench) and ``JB_BENCH_REDIS`` (default redis://127.0.0.1:6379/15, flushed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from typing import Any

from benchmarks.stores import BENCH_DB, drop_jobbridge_tables, ensure_pg_database, flush_redis_db, pg_url
from jobbridge import Job, JobBridge, JobContext
from jobbridge.drivers.schedule_port import Fire, schedule_store_of
from jobbridge.scheduling.scheduler import Scheduler
from jobbridge.settings import Settings

REDIS = os.environ.get("JB_BENCH_REDIS", "redis://127.0.0.1:6379/15")


class Noop(Job, name="bench.scheduled-noop", queue="bench"):
    n: int = 0

    def handle(self, ctx: JobContext) -> None:
        pass


def settings_for(store: str) -> dict[str, Any]:
    if store == "redis":
        flush_redis_db(REDIS)
        return {"driver": "redis", "redis_url": REDIS}
    ensure_pg_database(BENCH_DB)
    url = pg_url(BENCH_DB)
    drop_jobbridge_tables(url)
    return {"driver": "database", "database_url": url}


def measure(store: str, entries: int, minutes: float) -> dict[str, float]:
    bridge = JobBridge(Settings.from_mapping(settings_for(store)), jobs=[Noop])
    for i in range(entries):
        bridge.schedule(f"bench-{i}", Noop(n=i), every=60)
    scheduler = Scheduler(bridge)
    store_port = schedule_store_of(bridge.driver())
    assert store_port is not None
    delays: list[float] = []
    fire = store_port.fire_many

    def timed(firings: Any) -> list[Fire]:
        done = fire(firings)
        returned = store_port.now()  # the ticks are on the store's clock
        delays.extend(returned - f.tick for f, outcome in zip(firings, done, strict=True) if outcome is Fire.PUSHED)
        return done

    store_port.fire_many = timed  # type: ignore[method-assign]
    scheduler.step()  # the first look: every entry is new, and fires its current tick if it is on time
    first = len(delays)
    delays.clear()
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    cpu, wall = time.process_time(), time.monotonic()
    thread.start()
    time.sleep(minutes * 60)
    stop.set()
    thread.join()
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    ready = sum(c.ready for c in bridge.driver().counts() if c.queue == "bench")
    bridge.close()
    if ready != first + len(delays):
        raise SystemExit(f"{store}: {first + len(delays)} ticks dispatched, but {ready} jobs are ready in the queue")
    ordered = sorted(delays) or [float("nan")]
    return {"fired": len(delays), "cpu_per_minute": cpu / (wall / 60),
            "p50": statistics.median(ordered), "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            "max": ordered[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.schedules", description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", choices=("postgres", "redis"))
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--minutes", type=float, default=2.0)
    args = parser.parse_args()
    print(f"{'store':<10} {'entries':>8} {'fired':>8} {'cpu s/min':>10} {'p50 s':>8} {'p99 s':>8} {'max s':>8} "
          f"{'load':>10}")
    for store in args.stores:
        before = os.getloadavg()[0]
        got = measure(store, args.entries, args.minutes)
        print(f"{store:<10} {args.entries:>8} {got['fired']:>8.0f} {got['cpu_per_minute']:>10.2f} "
              f"{got['p50']:>8.3f} {got['p99']:>8.3f} {got['max']:>8.3f} {before:>4.1f}-{os.getloadavg()[0]:<4.1f}")


if __name__ == "__main__":
    main()
