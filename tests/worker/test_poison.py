"""One bad message never stops a worker: it runs once or is failed once, with its reason, among good jobs.

`RawStore` keeps some jobs as the raw bodies a real store would hand back
(bytes, text, a count beside the body) and builds their reservations with
`reservation_from_body`, as every driver does; the worker runs in-process.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from jobbridge.drivers.memory import MemoryDriver
from jobbridge.envelope import Envelope, Reservation, reservation_from_body
from jobbridge.limits import MAX_TIMEOUT
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending
from tests.worker import jobs
from tests.worker.conftest import Harness

SECRET = "sk-live-SECRET-9f3a"


class RawStore(MemoryDriver):
    """A memory store holding some jobs as stored bodies, decoded at reserve as a real store's are."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.raw: dict[str, object] = {}

    def inject(self, job_id: str, body: object, *, attempts: int = 0) -> None:
        """Store ``body`` under ``job_id``; ``attempts`` is the count the store keeps beside it."""
        now = self.clock.now()
        slot = Envelope(id=job_id, name="<raw>", queue="default", payload={}, tries=1, timeout=1.0,
                        available_at=now, created_at=now, attempts=attempts)
        self.push([slot])
        self.raw[job_id] = body

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        return [self._as_stored(res) for res in super().reserve(queues, limit, wait=wait)]

    def _as_stored(self, res: Reservation) -> Reservation:
        if res.id not in self.raw:
            return res
        return reservation_from_body(self.raw[res.id], receipt=res.receipt, lease_until=res.lease_until,
                                     now=self.clock.now(), id_hint=res.id, queue_hint=res.envelope.queue,
                                     attempts=res.envelope.attempts)


Change = Callable[[dict[str, Any]], object]


def field(key: str, value: object) -> Change:
    def change(data: dict[str, Any]) -> object:
        data[key] = value
        return orjson.dumps(data)

    return change


def text(raw: bytes) -> Change:
    return lambda data: raw


def with_attempts_above_64_bits(data: dict[str, Any]) -> object:
    return orjson.dumps(data).replace(b'"attempts":0', b'"attempts":1180591620717411303424')


#: kind -> (how the stored body is made from a good one, the count kept beside it, what must happen)
POISON: dict[str, tuple[Change, int, str]] = {
    "not-json": (text(b"{not json"), 0, "not JSON"),
    "not-utf8": (text(b"\xff\xfe\x00garbage"), 0, "not valid UTF-8"),
    "json-array": (text(b"[1, 2, 3]"), 0, "not a JSON object"),
    "an-int-body": (lambda data: 123, 0, "of type int"),
    "no-payload": (lambda data: orjson.dumps({k: v for k, v in data.items() if k != "payload"}), 0, "payload"),
    "id-int": (field("id", 7), 0, "id: expected"),
    "name-300": (field("name", "n" * 300), 0, "name: expected"),
    "tries-bool": (field("tries", True), 0, "tries: expected"),
    "timeout-negative": (field("timeout", -1), 0, "timeout: expected"),
    "attempts-negative": (field("attempts", -5), 0, "attempts: expected"),
    "attempts-64-bits": (with_attempts_above_64_bits, 0, "attempts: expected"),
    "attempts-column-negative": (orjson.dumps, -5, "attempts (the store's count): expected"),
    "available-far-past": (field("available_at", -1e18), 0, "available_at: expected"),
    "unique-key-int": (field("unique_key", 5), 0, "unique_key: expected"),
    "headers-list": (field("headers", [1]), 0, "headers: expected"),
    "unknown-name": (field("name", "nobody.knows"), 0, "UnknownJob"),
    "extra-payload-field": (field("payload", {"tag": "x", SECRET: 1}), 0, "1 unknown field"),
    "payload-mistyped": (field("payload", {"tag": [SECRET]}), 0, "OnQueue.tag: expected str, got a list"),
}
#: kinds that are odd but valid: each runs exactly once
RUNS: dict[str, Change] = {
    "text-body": lambda data: orjson.dumps(data).decode(),
    "memoryview-body": lambda data: memoryview(orjson.dumps(data)),
    "timeout-1e12": field("timeout", 1e12),
    "available-at-epoch": field("available_at", 1.0),
    "a-later-field": field("added_by_a_later_release", {"x": 1}),
}


def test_every_poison_kind_fails_once_with_its_reason_and_the_good_jobs_run_once(
        harness: Harness, clock: FixedClock) -> None:
    store = RawStore(clock=clock)
    bridge = harness.bridge(driver=store)
    ids: dict[str, str] = {}
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(25))
    for kind, change in [*((k, v[0]) for k, v in POISON.items()), *RUNS.items()]:
        env = bridge.envelope(jobs.OnQueue(tag=kind))
        attempts = POISON[kind][1] if kind in POISON else 0
        store.inject(env.id, change(orjson.loads(env.encode())), attempts=attempts)
        ids[kind] = env.id
    keyed = bridge.envelope(jobs.Keyed(ref=uuid.uuid4()))  # its UUID field will hold an integer
    store.inject(keyed.id, field("payload", {"ref": 123})(orjson.loads(keyed.encode())))
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(25, 50))

    worker = harness.worker(bridge, concurrency=4, stop_when_empty=True)
    stats = harness.start(worker).join()

    assert worker.exit_code == 0
    assert sorted(n for kind, n in jobs.RAN if kind == "noop") == list(range(50)), "every good job ran once"
    assert sorted(tag for kind, tag in jobs.RAN if kind == "on-queue") == sorted(RUNS), "each odd one ran once"
    failed = {f.id: f for f in store.failed.list(500)}
    assert len(failed) == len(POISON) + 1, "every poison message is in the failed store, once"
    for kind, (_, _, reason) in POISON.items():
        assert reason in failed[ids[kind]].error, (kind, failed[ids[kind]].error)
    assert "Keyed.ref: expected UUID, got an integer" in failed[keyed.id].error, "a permanent failure, never retried"
    assert not any(SECRET in f.error for f in failed.values()), "no error quotes a stored value or field name"
    assert store.raw[ids["not-utf8"]] == failed[ids["not-utf8"]].body, "the failed store keeps the body as stored"
    assert pending(store, "default") == 0
    assert stats.processed == 50 + len(RUNS) + len(POISON) + 1


def test_a_huge_timeout_does_not_switch_timeouts_off_for_the_jobs_after_it(
        harness: Harness, clock: FixedClock) -> None:
    store = RawStore(clock=clock)
    bridge = harness.bridge(driver=store)
    huge = bridge.envelope(jobs.Noop(n=1))
    store.push([huge.replace(timeout=1e12)])  # as a store could hold it, never clamped by a dispatch
    bridge.dispatch(jobs.Spin(), tries=1)  # loops in pure Python until its 0.3 s timeout stops it
    worker = harness.worker(bridge, concurrency=1, stop_when_empty=True)
    stats = harness.start(worker).join()  # with timeouts switched off, the loop would run for a minute
    assert ("noop", 1) in jobs.RAN and ("spin", 1) in jobs.RAN
    assert (stats.succeeded, stats.failed) == (1, 1), "the looping job was stopped at its timeout"
    (failed,) = store.failed.list()
    assert failed.error.startswith("JobTimeout: attempt exceeded its timeout of 0.3s")
    watchdog = bridge.executor().watchdog
    assert watchdog.held <= 2, "finished attempts left nothing in the watchdog"


def test_a_stored_timeout_beyond_the_maximum_is_clamped_when_read(harness: Harness, clock: FixedClock) -> None:
    store = RawStore(clock=clock)
    bridge = harness.bridge(driver=store)
    env = bridge.envelope(jobs.Noop(n=3))
    store.inject(env.id, orjson.dumps({**orjson.loads(env.encode()), "timeout": 1e300}))
    (res,) = store.reserve(["default"], 1)
    assert res.decode_error is None and res.envelope.timeout == MAX_TIMEOUT


def test_a_fault_outside_the_job_is_retried_while_tries_remain_then_failed_never_released_forever(
        harness: Harness, clock: FixedClock) -> None:
    bridge = harness.bridge()
    bridge.dispatch(jobs.Noop(n=1), tries=2)
    executor = bridge.executor()

    def broken(res: Reservation) -> Any:
        raise RuntimeError("the executor itself failed")

    executor.run = broken  # type: ignore[method-assign]
    first = harness.worker(bridge, stop_when_empty=True).run()
    assert (first.released, first.failed) == (1, 0), "released with a backoff: a try remains"
    clock.advance(600)
    second = harness.worker(bridge, stop_when_empty=True).run()
    assert (second.released, second.failed) == (0, 1), "its tries are spent: failed, not released again"
    (failed,) = bridge.driver().failed.list()
    assert failed.error.startswith("RuntimeError: the executor itself failed") and failed.attempts == 2
    assert jobs.RAN == [], "the job's own code never ran"
    assert pending(bridge.driver(), "default") == 0
