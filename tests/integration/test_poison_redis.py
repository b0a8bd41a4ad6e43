"""Poison messages on the Redis driver, with a real `jobbridge worker` (issue 9).

Each bad message is written straight into a queue's stream (as a foreign
producer, a hand edit or a bug would leave it) beside good jobs dispatched
through a bridge. One worker subprocess works every queue with
``--stop-when-empty``; then every good job ran exactly once, every bad message
is in the failed store once with a reason naming what was wrong, and the worker
exited 0 with nothing left on the streams (see `poison`).

Beside the envelope-level catalogue, the kinds only a stream entry can hold:
an ``id`` field that is not UTF-8 (it once crashed the worker, and every worker
after it), an ``attempts`` field above 64 bits, negative or not a number,
entries missing a field or carrying one more, and an ``id`` field that is not
the body's. A stand-in whose ``id`` field cannot name it is failed under its
stream entry id, which is what the test records as its id.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from jobbridge import JobBridge
from jobbridge.drivers.redis import RedisDriver
from jobbridge.envelope import new_id
from jobbridge.settings import Settings
from tests.drivers.redis_helpers import drop_keys
from tests.integration import poison_app
from tests.integration.poison import (
    EXPECT,
    GOOD_PER_KIND,
    Expect,
    assert_outcome,
    envelope,
    poison_bodies,
    start_worker,
)
from tests.integration.reliability_support import FileRunsReader, Workers
from tests.services import ensure_redis

pytestmark = pytest.mark.slow

#: the poison only a stream entry can hold: kind -> (what must become of it, the entry's fields
#: beside a good body; None drops the field, "<fresh>" is a second id, unlike the body's)
STREAM_KINDS: dict[str, tuple[Expect, dict[str, Any]]] = {
    "id_field_not_utf8": (Expect("fail", ("utf",)), {"id": b"\xff\xfe\xfd"}),
    "attempts_field_above_64_bits": (Expect("fail", ("attempts",)), {"attempts": str(2**70)}),
    "attempts_field_negative": (Expect("fail", ("attempts",)), {"attempts": "-3"}),
    "attempts_field_not_a_number": (Expect("fail", ("attempts",)), {"attempts": "three"}),
    "no_id_field": (Expect("fail", ("id",)), {"id": None}),
    "no_body_field": (Expect("fail", ("body",)), {"body": None}),
    "no_attempts_field": (Expect("fail", ("attempts",)), {"attempts": None}),
    "extra_field": (Expect("fail", ("field",)), {"colour": "red"}),
    "id_field_not_the_body_id": (Expect("fail", ("id",)), {"id": "<fresh>"}),
}
MIXED = 1_000


class Store:
    """A prefix on the shared Redis, a bridge dispatching to it, the runs file and the worker processes."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.prefix = url, f"jbpoison:{uuid.uuid4().hex[:12]}:"
        self.bridge = JobBridge(Settings.from_mapping({"driver": "redis", "redis_url": url,
                                                       "redis_prefix": self.prefix}), jobs=poison_app.ALL)
        driver = self.bridge.driver()
        assert isinstance(driver, RedisDriver)
        self.driver = driver
        self.runs = FileRunsReader(tmp / "runs.log")
        self.workers = Workers(tmp, {"JOBBRIDGE_DRIVER": "redis", "JOBBRIDGE_REDIS_URL": url,
                                     "JOBBRIDGE_REDIS_PREFIX": self.prefix, **self.runs.variable})

    def write_bad(self, queue: str, kind: str) -> str:
        """One bad entry of ``kind`` on ``queue``'s stream; returns the id its failure is stored under."""
        job_id = new_id()
        if kind in EXPECT:
            fields: dict[str, Any] = {"id": job_id, "body": poison_bodies(queue, job_id, [kind])[kind],
                                      "attempts": "0"}
        else:
            fields = {"id": job_id, "body": orjson.dumps(envelope(id=job_id, queue=queue)), "attempts": "0"}
            fields.update(STREAM_KINDS[kind][1])
            if fields["id"] == "<fresh>":
                fields["id"] = new_id()
        kept = {name: value for name, value in fields.items() if value is not None}
        entry = self.driver.client.xadd(self.driver.keys.stream(queue), kept)
        self.driver.client.sadd(self.driver.keys.queues, queue)
        named = isinstance(kept.get("id"), str)
        return str(kept["id"]) if named else entry.decode()

    def good(self, queue: str, count: int) -> list[str]:
        ids = self.bridge.dispatch_many([poison_app.Good(n=i) for i in range(count)], queue=queue)
        return [job_id for job_id in ids if job_id is not None]

    def verdict(self, good: list[str], bad: dict[str, str], proc: Any) -> None:
        code = self.workers.exited(proc, timeout=300)
        assert_outcome(good=good, bad=bad, runs=self.runs.all(), failed=self.driver.failed.list(10 * MIXED),
                       exit_code=code, output=self.workers.output(proc),
                       expect={**EXPECT, **{kind: found[0] for kind, found in STREAM_KINDS.items()}})
        assert self.driver.counts() == [], "every entry acknowledged or failed"

    def close(self) -> None:
        self.workers.close()
        self.bridge.close()
        drop_keys(self.url, self.prefix)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    found = Store(ensure_redis(), tmp_path)
    try:
        yield found
    finally:
        found.close()


def test_each_kind_of_poison_beside_fifty_good_jobs(store: Store) -> None:
    """One bad entry of each kind, each on its own queue among 50 good jobs; one worker works them all."""
    good: list[str] = []
    bad: dict[str, str] = {}
    kinds = [*EXPECT, *STREAM_KINDS]
    for kind in kinds:
        queue = f"poison.{kind}"
        good += store.good(queue, GOOD_PER_KIND // 2)
        bad[store.write_bad(queue, kind)] = kind
        good += store.good(queue, GOOD_PER_KIND - GOOD_PER_KIND // 2)
    store.verdict(good, bad, start_worker(store.workers, [f"poison.{kind}" for kind in kinds]))


def test_a_thousand_bad_entries_of_every_kind_among_a_thousand_good(store: Store) -> None:
    """The mixed run: bad and good interleaved on one stream (the 10 MB body once, the rest cycling)."""
    queue = "poison.mixed"
    cycle = itertools.cycle([kind for kind in [*EXPECT, *STREAM_KINDS] if kind != "huge_body"])
    kinds = ["huge_body", *(next(cycle) for _ in range(MIXED - 1))]
    good: list[str] = []
    bad: dict[str, str] = {}
    for chunk in range(10):
        good += store.good(queue, MIXED // 10)
        for kind in kinds[chunk * MIXED // 10:(chunk + 1) * MIXED // 10]:
            bad[store.write_bad(queue, kind)] = kind
    store.verdict(good, bad, start_worker(store.workers, [queue]))
