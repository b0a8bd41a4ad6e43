"""The per-minute counters on every store that keeps them: adding sums, reads by range, prunes, never loses a count.

Each store runs against its real server (SQLite, PostgreSQL, MariaDB, Redis)
and the memory one: two adds of one (minute, queue) sum; concurrent adds from
many threads (as many workers beating at once) lose nothing; a read returns
the minutes at or after its start; a prune deletes the old minutes (Redis:
each minute's hash carries its expiry instead). And `Tally`, the worker's side.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobbridge.app import JobBridge
from jobbridge.drivers.throughput_port import KEEP_FOR, MINUTE, MinuteCount, Tally, ThroughputStore, throughput_of
from jobbridge.settings import Settings
from tests.services import ensure_mariadb, ensure_postgres, ensure_redis


def _database(url: Callable[[Path], str]) -> Callable[[Path], dict[str, str]]:
    return lambda tmp: {"driver": "database", "database_url": url(tmp)}


STORES: dict[str, Callable[[Path], dict[str, str]]] = {
    "memory": lambda tmp: {"driver": "memory"},
    "sqlite": _database(lambda tmp: f"sqlite:///{tmp / 'counts.sqlite3'}"),
    "postgresql": _database(lambda tmp: ensure_postgres()),
    "mariadb": _database(lambda tmp: ensure_mariadb()),
    "redis": lambda tmp: {"driver": "redis", "redis_url": ensure_redis(),
                          "redis_prefix": f"jbtest:{uuid.uuid4().hex[:8]}:"},
}


@pytest.fixture(params=sorted(STORES))
def bridge(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobBridge]:
    found = JobBridge(Settings.from_mapping(STORES[request.param](tmp_path)))
    driver = found.driver()
    driver.migrate()
    store = throughput_of(driver)
    assert store is not None
    store.prune(store.now() + 10 * KEEP_FOR)  # a shared server's earlier runs
    yield found
    store.prune(store.now() + 10 * KEEP_FOR)
    found.close()


def counters(bridge: JobBridge) -> ThroughputStore:
    store = throughput_of(bridge.driver())
    assert store is not None
    return store


def by_queue(found: list[MinuteCount], minute: int) -> dict[str, tuple[int, int, int]]:
    return {c.queue: (c.processed, c.failed, c.released) for c in found if c.minute == minute}


def test_adds_sum_and_reads_keep_to_their_range(bridge: JobBridge) -> None:
    store = counters(bridge)
    now = (int(store.now()) // MINUTE) * MINUTE
    earlier = now - 10 * MINUTE
    store.add([MinuteCount(earlier, "mail", 3, 1, 0), MinuteCount(now, "mail", 1), MinuteCount(now, "bulk", 4, 0, 2)])
    store.add([MinuteCount(now, "mail", 2, 2, 1)])
    store.add([])
    found = store.read(earlier)
    assert by_queue(found, now) == {"mail": (3, 2, 1), "bulk": (4, 0, 2)}
    assert by_queue(found, earlier) == {"mail": (3, 1, 0)}
    assert [c.minute for c in found] == sorted(c.minute for c in found)
    assert by_queue(store.read(earlier + MINUTE), earlier) == {}


def test_concurrent_adds_lose_no_count(bridge: JobBridge) -> None:
    store = counters(bridge)
    now = (int(store.now()) // MINUTE) * MINUTE

    def beat() -> None:
        for _ in range(10):
            store.add([MinuteCount(now, "mail", 1, 1, 0), MinuteCount(now, "bulk", 2)])

    threads = [threading.Thread(target=beat) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert by_queue(store.read(now), now) == {"mail": (60, 60, 0), "bulk": (120, 0, 0)}


def test_old_minutes_are_pruned(bridge: JobBridge) -> None:
    store = counters(bridge)
    now = (int(store.now()) // MINUTE) * MINUTE
    old = now - 30 * MINUTE
    store.add([MinuteCount(old, "mail", 5), MinuteCount(now, "mail", 1)])
    if bridge.settings.connection().driver == "redis":
        driver = bridge.driver()
        ttl = driver.client.ttl(f"{driver.keys.prefix}throughput:{now}")  # type: ignore[attr-defined]
        assert 0 < ttl <= KEEP_FOR + MINUTE
        return
    assert store.prune(now) >= 1
    assert by_queue(store.read(old), old) == {} and by_queue(store.read(old), now) == {"mail": (1, 0, 0)}


def test_a_tally_names_minutes_in_the_store_clock_and_keeps_refused_counts() -> None:
    tally = Tally()
    tally.offset = 120.0  # the store's clock is two minutes ahead of this host's
    tally.add(1_000.0, "mail")
    tally.add(1_010.0, "mail", failed=True)
    tally.add(1_010.0, "mail", released=True)
    drained = tally.drain()
    assert drained == [MinuteCount(1_080, "mail", 3, 1, 1)] and tally.drain() == []
    tally.restore(drained)
    tally.add(1_000.0, "mail")
    assert tally.drain() == [MinuteCount(1_080, "mail", 4, 1, 1)]
