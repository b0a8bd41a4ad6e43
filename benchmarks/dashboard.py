"""``python -m benchmarks.dashboard [sqlite|postgres|all] [--jobs 100000]``: the dashboard with a large failed store.

Fills the failed store with ``--jobs`` failures (realistic error texts with a
traceback, four job names, three queues, spread over a day) straight through
SQL, then times each page as the dashboard serves it (through its ASGI
callable, in this process): the failed list's first page, a page deep in it
(by cursor), filtered by queue, by job, by time, by error text (a common and a
rare one: the rare one reads every row the other filters leave), one failed
job, and the overview. Prints the median of ``--repeat`` runs per page, in
milliseconds. PostgreSQL runs in a database of its own (``jb_dash_bench``),
so nothing it writes meets another run's tables. Not a test: a number to
watch (the issue's target is under a second for the failed page).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from sqlalchemy import create_engine, insert, text

from jobbridge.app import JobBridge
from jobbridge.dashboard import create_app
from jobbridge.drivers.database.schema import failed_jobs
from jobbridge.envelope import Envelope
from jobbridge.settings import Settings

NAMES = ("billing.invoice", "mail.welcome", "search.reindex", "media.thumbnail")
QUEUES = ("default", "mail", "bulk")
ERRORS = ("ConnectionError: the SMTP server closed the connection", "TimeoutError: attempt exceeded 60s",
          "ValueError: invoice 1234 has no lines", "KeyError: 'customer'")
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
PG_BENCH = "postgresql://postgres@127.0.0.1:5432/jb_dash_bench"


def traceback_of(error: str, n: int) -> str:
    frames = "".join(f'  File "/srv/app/jobs/module_{k}.py", line {10 + k}, in handle_{k}\n    step_{k}(payload)\n'
                     for k in range(8))
    return f"{error} (job {n})\nTraceback (most recent call last):\n{frames}{error}"


def fill(bridge: JobBridge, count: int, now: float) -> None:
    driver = bridge.driver()
    driver.migrate()
    driver.failed.flush()
    engine = driver.engine  # type: ignore[attr-defined]
    rng = random.Random(7)
    body = Envelope.new("billing.invoice", "default", {"invoice_id": 1}, tries=3, timeout=60, now=now).encode()
    batch = []
    for n in range(count):
        error = ERRORS[n % len(ERRORS)] if n != count // 2 else "RareError: the one needle in the store"
        batch.append({"id": f"{n:08d}-bench", "queue": QUEUES[n % 3], "name": NAMES[n % 4], "attempts": 3,
                      "error": traceback_of(error, n), "failed_at": now - rng.random() * 86_400, "body": body})
        if len(batch) == 5_000:
            with engine.begin() as conn:
                conn.execute(insert(failed_jobs), batch)
            batch = []
    if batch:
        with engine.begin() as conn:
            conn.execute(insert(failed_jobs), batch)
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE jobbridge_failed_jobs"))


def timed(get: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        get()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1000


def measure(bridge: JobBridge, repeat: int, now: float) -> list[tuple[str, float]]:
    from starlette.testclient import TestClient

    client = TestClient(create_app(bridge), base_url="http://127.0.0.1")
    deep = bridge.driver().failed.list(5_001)[-1]
    pages = {
        "failed, first page": "/failed",
        "failed, page 100 (cursor)": f"/failed?cursor={deep.failed_at!r}:1",
        "failed, by queue": "/failed?queue=mail",
        "failed, by job": "/failed?job=search.reindex",
        "failed, last hour": f"/failed?since={now - 3600}",
        "failed, error text (common)": "/failed?error=TimeoutError",
        "failed, error text (rare)": "/failed?error=needle+in+the+store",
        "one failed job": f"/failed/{deep.id}",
        "overview": "/",
    }

    def get(path: str) -> Callable[[], object]:
        def run() -> object:
            answer = client.get(path)
            assert answer.status_code == 200, (path, answer.status_code)
            return answer
        return run

    return [(label, timed(get(path), repeat)) for label, path in pages.items()]


def bridge_for(backend: str) -> JobBridge:
    if backend == "postgres":
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            if not conn.execute(text("SELECT 1 FROM pg_database WHERE datname = 'jb_dash_bench'")).scalar():
                conn.execute(text("CREATE DATABASE jb_dash_bench"))
        admin.dispose()
        url = PG_BENCH
    else:
        url = "sqlite:////tmp/jb-dash-bench.sqlite3"
    return JobBridge(Settings.from_mapping({"driver": "database", "database_url": url}))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dashboard", description=__doc__.splitlines()[0])
    parser.add_argument("backend", nargs="?", default="all", choices=("sqlite", "postgres", "all"))
    parser.add_argument("--jobs", type=int, default=100_000, help="failed jobs in the store (default 100,000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per page; the median is printed")
    args = parser.parse_args()
    for backend in ("sqlite", "postgres") if args.backend == "all" else (args.backend,):
        bridge = bridge_for(backend)
        now = time.time()
        start = time.perf_counter()
        fill(bridge, args.jobs, now)
        print(f"\n{backend}: {args.jobs:,} failed jobs stored in {time.perf_counter() - start:.1f}s")
        for label, ms in measure(bridge, args.repeat, now):
            print(f"  {label:<30} {ms:8.1f} ms")
        bridge.driver().failed.flush()
        bridge.close()


if __name__ == "__main__":
    main()
