"""Shared rate buckets on every store that keeps them: SQLite, PostgreSQL, MariaDB, Redis (and memory).

Exact under concurrency: takers on many threads, each with its own connection, are granted turns
exactly one interval apart (no two share a turn), and hammering a bucket for a while never
yields more turns than the rate allows over that time.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobbridge.clock import SYSTEM_CLOCK
from jobbridge.drivers.database.driver import DatabaseDriver
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.rate_limits import RateBuckets, RateLimit
from tests.drivers.database_servers import fresh_database
from tests.drivers.redis_helpers import drop_keys, make_driver
from tests.services import ensure_redis

THREADS = 8


@pytest.fixture(params=["sqlite", "postgresql", "mysql", "redis", "memory"])
def buckets(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RateBuckets]:
    if request.param == "redis":
        url, prefix = ensure_redis(), f"jbtest:{uuid.uuid4().hex[:12]}:"
        redis_driver = make_driver(url, prefix, SYSTEM_CLOCK)
        yield redis_driver.rate_buckets
        redis_driver.close()
        drop_keys(url, prefix)
    elif request.param == "memory":
        yield MemoryDriver().rate_buckets
    else:
        with fresh_database(request.param, tmp_path) as url:
            driver = DatabaseDriver(url)
            driver.migrate()
            yield driver.rate_buckets
            driver.close()


def run_threads(target: object, n: int = THREADS) -> None:
    threads = [threading.Thread(target=target) for _ in range(n)]  # type: ignore[arg-type]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


#: how far a turn's start may read early: the store's and this host's clocks tick in milliseconds
EPSILON = 0.005


def test_the_buckets_are_shared(buckets: RateBuckets) -> None:
    assert buckets.shared is True


def test_concurrent_takers_are_granted_distinct_turns_one_interval_apart(buckets: RateBuckets) -> None:
    limit = RateLimit("10/s")
    # each turn's start, known only to lie between the call's start and its answer's arrival (plus
    # its offset): on a busy machine a thread may read the clock long after the store answered
    turns: list[tuple[float, float]] = []
    lock = threading.Lock()
    go = threading.Barrier(THREADS)

    def taker() -> None:
        go.wait()
        for _ in range(3):
            asked = time.time()
            grants = buckets.take("contended", limit, 1, horizon=10.0)
            answered = time.time()
            with lock:
                turns.extend((asked + start, answered + start) for start in grants.starts)

    run_threads(taker)
    assert len(turns) == THREADS * 3, "every taker got its turn within the horizon"
    ordered = sorted(turns, key=lambda turn: turn[0] + turn[1])
    # two turns 0.1 s apart have windows spanning at least 0.1 s between them, however late each
    # clock was read; two takers granted one turn have windows as narrow as their round trips
    narrowest = min(max(a[1], b[1]) - min(a[0], b[0]) for a, b in itertools.pairwise(ordered))
    assert narrowest >= 0.1 - EPSILON, f"two turns within {narrowest:.4f}s at 10/s"
    assert max(t[1] for t in turns) - min(t[0] for t in turns) >= (len(turns) - 1) * 0.1 - EPSILON


def test_hammering_a_bucket_never_yields_more_than_the_rate(buckets: RateBuckets) -> None:
    limit = RateLimit("20/s", burst=2)
    granted: list[float] = []
    lock = threading.Lock()
    began = time.time()
    until = began + 10.0  # a bound only: the takers stop once ten turns are out (half a second at 20/s)

    def taker() -> None:
        while time.time() < until:
            with lock:
                if len(granted) >= 10:
                    return
            grants = buckets.take("hammered", limit, 2, horizon=0.0)
            with lock:
                granted.extend(time.time() for _ in grants.starts)

    run_threads(taker)
    elapsed = max(granted) - began
    assert len(granted) >= 10, "the bucket hands out turns while hammered"
    assert len(granted) <= limit.burst + 20 * elapsed + 1, f"{len(granted)} turns in {elapsed:.2f}s at 20/s"


def test_a_bucket_books_turns_ahead_and_says_when_the_next_is_free(buckets: RateBuckets) -> None:
    limit = RateLimit("2/s")
    grants = buckets.take("ahead", limit, 5, horizon=1.0)
    assert grants.starts[0] == pytest.approx(0.0, abs=0.01)
    assert [round(s, 1) for s in grants.starts] == [0.0, 0.5, 1.0][:len(grants.starts)]
    assert len(grants.starts) in (2, 3)  # the turn at exactly 1 s is on the horizon's edge
    assert grants.next_in == pytest.approx(len(grants.starts) * 0.5, abs=0.05)
    assert buckets.take("ahead", limit, 1, horizon=0.0).starts == ()
    assert buckets.take("elsewhere", limit, 1, horizon=0.0).starts != ()
