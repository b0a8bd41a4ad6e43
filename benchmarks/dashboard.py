"""``python -m benchmarks.dashboard [sqlite|postgres|mysql|redis|all] [--jobs 100000]``: a large failed store.

Fills the failed store with ``--jobs`` failures (realistic error texts with a
traceback, four job names, three queues, spread over a day) straight through
SQL (Redis: the hashes and the index ``fail.lua`` writes), then times each
page as the dashboard serves it (through its ASGI callable, in this process):
the failed list's first page, a page deep in it (by cursor), filtered by queue,
by job, by time, by error text (a common and a rare one: the rare one is what
an index, or its absence, shows), one failed job, and the overview. Prints the
median of ``--repeat`` runs per page, in milliseconds. PostgreSQL and MariaDB
run in a database of their own (``jb_dash_bench``), Redis in DB 15 under the
prefix ``jbdash:``, so nothing it writes meets another run's data or the test
suite's. Not a test: a number to watch (the issue's target is under a second
for the failed page).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

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
MYSQL_ADMIN = "mysql+pymysql://root@127.0.0.1:3306/test"
MYSQL_BENCH = "mysql://root@127.0.0.1:3306/jb_dash_bench"
REDIS_BENCH = "redis://127.0.0.1:6379/15"
BACKENDS = ("sqlite", "postgres", "mysql", "redis")


def traceback_of(error: str, n: int) -> str:
    frames = "".join(f'  File "/srv/app/jobs/module_{k}.py", line {10 + k}, in handle_{k}\n    step_{k}(payload)\n'
                     for k in range(8))
    return f"{error} (job {n})\nTraceback (most recent call last):\n{frames}{error}"


def rows(count: int, now: float) -> Iterator[dict[str, Any]]:
    """The failed jobs: one in ``count`` (the middle one) holds the rare error text."""
    rng = random.Random(7)
    body = Envelope.new("billing.invoice", "default", {"invoice_id": 1}, tries=3, timeout=60, now=now).encode()
    for n in range(count):
        error = ERRORS[n % len(ERRORS)] if n != count // 2 else "RareError: the one needle in the store"
        yield {"id": f"{n:08d}-bench", "queue": QUEUES[n % 3], "name": NAMES[n % 4], "attempts": 3,
               "error": traceback_of(error, n), "failed_at": now - rng.random() * 86_400, "body": body}


def fill(bridge: JobBridge, count: int, now: float) -> None:
    driver = bridge.driver()
    driver.migrate()
    driver.failed.flush()
    if hasattr(driver, "keys"):  # redis: the layout fail.lua writes
        _fill_redis(driver, count, now)
        return
    engine = driver.engine  # type: ignore[attr-defined]
    batch = []
    for row in rows(count, now):
        batch.append(row)
        if len(batch) == 5_000:
            with engine.begin() as conn:
                conn.execute(insert(failed_jobs), batch)
            batch = []
    if batch:
        with engine.begin() as conn:
            conn.execute(insert(failed_jobs), batch)
    # the statistics of the filled table, and on PostgreSQL its dead rows (the previous run's flush) reclaimed
    # and the trigram index's pending entries merged, as autovacuum would have done by the time anyone looks
    statement = {"postgresql": "VACUUM ANALYZE", "mysql": "ANALYZE TABLE"}.get(engine.dialect.name)
    if statement is not None:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f"{statement} jobbridge_failed_jobs"))


def _fill_redis(driver: Any, count: int, now: float) -> None:
    client, keys = driver.client, driver.keys
    pipe = client.pipeline(transaction=False)
    for n, row in enumerate(rows(count, now), 1):
        pipe.hset(keys.failed_job(row["id"]), mapping={**row, "failed_at": repr(row["failed_at"])})
        pipe.zadd(keys.failed, {row["id"]: row["failed_at"]})
        if n % 2_000 == 0:
            pipe.execute()
    pipe.execute()


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
    settings: dict[str, Any] = {"driver": "database"}
    if backend == "postgres":
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            if not conn.execute(text("SELECT 1 FROM pg_database WHERE datname = 'jb_dash_bench'")).scalar():
                conn.execute(text("CREATE DATABASE jb_dash_bench"))
        admin.dispose()
        settings["database_url"] = PG_BENCH
    elif backend == "mysql":
        admin = create_engine(MYSQL_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("CREATE DATABASE IF NOT EXISTS jb_dash_bench"))
        admin.dispose()
        settings["database_url"] = MYSQL_BENCH
    elif backend == "redis":
        settings = {"driver": "redis", "redis_url": REDIS_BENCH, "redis_prefix": "jbdash:"}
    else:
        settings["database_url"] = "sqlite:////tmp/jb-dash-bench.sqlite3"
    return JobBridge(Settings.from_mapping(settings))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dashboard", description=__doc__.splitlines()[0])
    parser.add_argument("backend", nargs="?", default="all", choices=(*BACKENDS, "all"))
    parser.add_argument("--jobs", type=int, default=100_000, help="failed jobs in the store (default 100,000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per page; the median is printed")
    args = parser.parse_args()
    for backend in BACKENDS if args.backend == "all" else (args.backend,):
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
