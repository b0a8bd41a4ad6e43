"""``python -m benchmarks.driver_loop redis|postgres|mysql|sqlite [--jobs N] [--batch K]``: the driver alone.

What one worker's loop asks of its driver, with no worker around it: ``--jobs``
queued no-op jobs (default 30,000) drained by one thread that reserves
``--batch`` (default 64, what a default worker holds) and then calls
``acknowledge_and_reserve`` with what it got, until the queue is empty. Nothing
runs; so the figure is the ceiling the driver's reserve and acknowledge put on a
worker, and the client CPU per job is what they cost the loop thread every job
waits for. On Redis the server's own time per job is read off ``INFO
commandstats`` (the change in ``cmdstat_evalsha`` over the run), so the part of
a round trip spent in the scripts shows beside the part spent in Python. Prints
one line per run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from benchmarks.drain import URLS, fresh
from jobbridge.drivers.base import AcknowledgingReserve

_EVALSHA = "cmdstat_evalsha"


def _server_usec(driver: Any) -> tuple[int, int] | None:
    """(calls, microseconds) of EVALSHA so far, on a Redis driver's server; None for any other store."""
    client = getattr(driver, "client", None)
    if client is None or not hasattr(client, "info"):
        return None
    stats = client.info("commandstats").get(_EVALSHA, {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def run(store: str, jobs: int, batch: int) -> str:
    """One fill and one timed drain; the line `main` prints."""
    url = URLS[store]()
    fresh(store, url)
    os.environ["JB_BENCH_URL"] = url
    from benchmarks.apps import jobbridge_app as app  # reads JB_BENCH_URL when imported

    bridge = app.bridge
    driver = bridge.driver()
    if not isinstance(driver, AcknowledgingReserve):
        raise SystemExit(f"the {store} driver does not acknowledge and reserve in one call")
    driver.migrate()
    for at in range(0, jobs, 5000):
        bridge.dispatch_many([app.Noop() for _ in range(min(5000, jobs - at))])
    before = _server_usec(driver)
    start, cpu = time.perf_counter(), time.process_time()
    got, done = driver.reserve(["default"], batch), 0
    while got:
        done += len(got)
        got = driver.acknowledge_and_reserve(got, ["default"], batch)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    line = (f"{store}: {done:,} jobs in {seconds:.2f}s = {done / seconds:,.0f} jobs/s; client "
            f"{1e6 * cpu / done:.1f} us CPU per job, {1e6 * seconds / done:.1f} us wall per job")
    after = _server_usec(driver)
    if before is not None and after is not None and after[0] > before[0]:
        usec, calls = after[1] - before[1], after[0] - before[0]
        line += f"; server {usec / done:.1f} us per job ({usec / calls:,.0f} us per script call, {calls:,} calls)"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.driver_loop", description=__doc__.splitlines()[0])
    parser.add_argument("store", choices=tuple(URLS))
    parser.add_argument("--jobs", type=int, default=30_000, help="no-op jobs to drain (default 30,000)")
    parser.add_argument("--batch", type=int, default=64, help="jobs per reserve (default 64)")
    args = parser.parse_args()
    print(run(args.store, args.jobs, args.batch), flush=True)


if __name__ == "__main__":
    main()
