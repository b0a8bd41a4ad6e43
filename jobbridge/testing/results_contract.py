"""The result-store contract: one suite every `ResultStore` must pass against its real backend.

Subclass `ResultStoreContract` in a test module and provide fixtures:

- ``clock``: a `FixedClock`;
- ``store``: an empty store on that clock;
- ``reopen`` (optional): a factory of further stores on the same backend and
  clock, as a restarted process would open them (the fixture closes them).
  Left at its default (None), the restart tests are skipped;
- ``store_url`` (optional): ``(url, options)`` that `open_store` in another
  OS process turns into a store on the same backend; None skips the
  many-process test.

Expiry is crossed by advancing the clock, never by sleeping. ``wait`` takes
real seconds: the tests give it a short timeout where it must give up and a
long one where it must be woken, and check what it returned, not how long it took.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import pytest

from jobbridge.envelope import new_id
from jobbridge.results.base import (
    FAILURE,
    PENDING,
    READY_STATES,
    REVOKED,
    STARTED,
    SUCCESS,
    ResultEncodeError,
    ResultRecord,
    ResultStore,
    UnknownCounter,
)
from jobbridge.testing.clock import FixedClock

Reopen = Callable[[], ResultStore]
StoreUrl = tuple[str, Mapping[str, Any]]

#: long enough that a woken wait never reaches it; short enough that a broken wake-up fails the run
WAKE_TIMEOUT = 30.0
#: the timeout of a wait that must give up
SHORT_TIMEOUT = 0.2


def decrement_in_a_process(url: str, options: Mapping[str, Any], now: float, key: str, times: int,
                           start: Any, out: Any) -> None:
    """Run in a spawned process: decrement ``key`` ``times`` times at the signal; report every value."""
    from jobbridge.results import open_store

    store = open_store(url, clock=FixedClock(now), **options)
    try:
        start.wait()
        out.put([store.counter_decrement(key) for _ in range(times)])
    finally:
        store.close()


class ResultStoreContract:
    """Results, cancellations and counters, as tests every backend must pass."""

    TTL: ClassVar[float] = 3600.0
    THREADS: ClassVar[int] = 8
    PER_THREAD: ClassVar[int] = 20
    PROCESSES: ClassVar[int] = 4
    PER_PROCESS: ClassVar[int] = 25

    @pytest.fixture
    def reopen(self) -> Iterator[Reopen | None]:
        yield None

    @pytest.fixture
    def store_url(self) -> StoreUrl | None:
        return None

    def writer(self, store: ResultStore, reopen: Reopen | None) -> ResultStore:
        """Who stores during a wait: another store on the backend where there can be one."""
        return reopen() if reopen is not None else store

    # -- results -----------------------------------------------------------------------------

    def test_is_a_result_store(self, store: ResultStore) -> None:
        assert isinstance(store, ResultStore)

    def test_every_field_round_trips(self, store: ResultStore, clock: FixedClock) -> None:
        record = ResultRecord(
            id=new_id(), state=FAILURE, name="billing.invoice",
            result={"rows": [1, 2.5, "x", None, True, {"deep": [[], {}]}], "ünïcode": "✓ 🚀"},
            meta={"current": 3, "total": [10]},
            error="ValueError: bad invoice ✗", traceback="Traceback (most recent call last):\n  ...\n",
            exception_type="billing.errors.InvoiceError",
        )
        store.store(record, self.TTL)
        got = store.get(record.id)
        assert got is not None
        now = clock.now()
        assert got == dataclasses.replace(record, created_at=now, updated_at=now, expires_at=now + self.TTL)
        assert got.ready

    def test_json_shapes_come_back_as_json_gives_them(self, store: ResultStore) -> None:
        values: list[Any] = [[1, [2, [3]]], "text", 7, 1.5, None, True, {"k": {"k": [{}]}}]
        for value in values:
            id = new_id()
            store.store(ResultRecord(id, SUCCESS, result=value), self.TTL)
            got = store.get(id)
            assert got is not None and got.result == value and got.meta is None
        store.store(ResultRecord("tuple", SUCCESS, result=(1, 2), meta={"t": (3,)}), self.TTL)
        got = store.get("tuple")
        assert got is not None and got.result == [1, 2] and got.meta == {"t": [3]}

    def test_a_large_result_and_traceback_fit(self, store: ResultStore) -> None:
        big = ResultRecord(new_id(), FAILURE, result=["x" * 1000] * 400, traceback="line\n" * 60_000)
        store.store(big, self.TTL)
        got = store.get(big.id)
        assert got is not None and got.result == big.result and got.traceback == big.traceback

    def test_a_value_json_cannot_hold_is_refused_before_storing(self, store: ResultStore) -> None:
        with pytest.raises(ResultEncodeError, match="result"):
            store.store(ResultRecord("bad", SUCCESS, result={1, 2}), self.TTL)
        with pytest.raises(ResultEncodeError, match="meta"):
            store.store(ResultRecord("bad", STARTED, meta={"x": object()}), self.TTL)
        assert store.get("bad") is None

    def test_each_state_overwrites_the_last(self, store: ResultStore, clock: FixedClock) -> None:
        id, first = new_id(), clock.now()
        store.store(ResultRecord(id, PENDING, name="n"), self.TTL)
        clock.advance(1)
        store.store(ResultRecord(id, STARTED, name="n"), self.TTL)
        clock.advance(1)
        store.store(ResultRecord(id, "PROGRESS", name="n", meta={"done": 5, "of": 10}), self.TTL)
        progress = store.get(id)
        assert progress is not None and progress.state == "PROGRESS" and not progress.ready
        assert progress.meta == {"done": 5, "of": 10}
        clock.advance(1)
        store.store(ResultRecord(id, SUCCESS, name="n", result=42), self.TTL)
        done = store.get(id)
        assert done is not None and (done.state, done.result, done.meta) == (SUCCESS, 42, None)
        assert (done.created_at, done.updated_at) == (first, first + 3)
        assert done.expires_at == first + 3 + self.TTL

    def test_ready_states(self) -> None:
        assert {SUCCESS, FAILURE, REVOKED} == READY_STATES
        assert not ResultRecord("x", "PROGRESS").ready and not ResultRecord("x", PENDING).ready
        assert ResultRecord("x", REVOKED).ready

    def test_an_unknown_id_is_none(self, store: ResultStore) -> None:
        assert store.get("no-such-id") is None
        assert store.get_many(["no-such-id"]) == {}

    def test_get_many_returns_the_live_ones_by_id(self, store: ResultStore, clock: FixedClock) -> None:
        ids = [new_id() for _ in range(300)]
        for i, id in enumerate(ids):
            store.store(ResultRecord(id, SUCCESS, result=i), self.TTL if i % 3 else 10)
        clock.advance(11)
        got = store.get_many([*ids, "unknown"])
        assert set(got) == {id for i, id in enumerate(ids) if i % 3}
        assert all(got[id].result == i for i, id in enumerate(ids) if id in got)
        assert store.get_many([]) == {}

    def test_a_result_expires_by_the_clock_then_prune_removes_it(self, store: ResultStore,
                                                                clock: FixedClock) -> None:
        store.store(ResultRecord("old", SUCCESS, result=1, created_at=clock.now() - 5), 10)
        clock.advance(9)
        assert store.get("old") is not None
        clock.advance(2)
        assert store.get("old") is None and store.get_many(["old"]) == {}
        assert store.prune() == 1
        assert store.prune() == 0 and store.get("old") is None
        store.store(ResultRecord("old", PENDING), 10)
        again = store.get("old")
        assert again is not None and again.created_at == clock.now()  # a new life, not the old one's

    def test_an_expired_record_is_replaced_not_revived(self, store: ResultStore, clock: FixedClock) -> None:
        store.store(ResultRecord("id", SUCCESS), 10)
        clock.advance(20)
        store.store(ResultRecord("id", STARTED), 10)
        got = store.get("id")
        assert got is not None and got.created_at == clock.now() and got.state == STARTED

    def test_forget(self, store: ResultStore) -> None:
        store.store(ResultRecord("gone", SUCCESS, result=[1]), self.TTL)
        store.store(ResultRecord("kept", SUCCESS), self.TTL)
        store.forget("gone")
        store.forget("never-there")
        assert store.get("gone") is None and store.get("kept") is not None

    def test_a_restarted_store_reads_what_was_stored(self, store: ResultStore, reopen: Reopen | None) -> None:
        if reopen is None:
            pytest.skip("this store lives and dies with its process")
        store.store(ResultRecord("kept", SUCCESS, result={"a": 1}), self.TTL)
        assert reopen().get("kept") == store.get("kept")

    # -- wait --------------------------------------------------------------------------------

    def test_wait_returns_a_ready_record_at_once(self, store: ResultStore) -> None:
        store.store(ResultRecord("done", SUCCESS, result="r"), self.TTL)
        got = store.wait("done", WAKE_TIMEOUT)
        assert got is not None and got.state == SUCCESS and got.result == "r"

    def test_wait_is_woken_by_a_store_from_elsewhere(self, store: ResultStore, reopen: Reopen | None) -> None:
        id = new_id()
        store.store(ResultRecord(id, STARTED), self.TTL)
        other = self.writer(store, reopen)

        def finish() -> None:
            other.store(ResultRecord(id, "PROGRESS", meta={"p": 1}), self.TTL)  # not ready: wait goes on
            other.store(ResultRecord(id, SUCCESS, result=[1, 2]), self.TTL)

        timer = threading.Timer(0.1, finish)
        timer.start()
        try:
            got = store.wait(id, WAKE_TIMEOUT)
        finally:
            timer.join()
        assert got is not None and got.state == SUCCESS and got.result == [1, 2]

    def test_wait_wakes_for_a_record_that_did_not_exist(self, store: ResultStore, reopen: Reopen | None) -> None:
        id = new_id()
        other = self.writer(store, reopen)
        timer = threading.Timer(0.1, lambda: other.store(ResultRecord(id, REVOKED), self.TTL))
        timer.start()
        try:
            got = store.wait(id, WAKE_TIMEOUT)
        finally:
            timer.join()
        assert got is not None and got.state == REVOKED

    def test_every_waiter_on_an_id_is_woken(self, store: ResultStore, reopen: Reopen | None) -> None:
        id, got = new_id(), []
        guard = threading.Lock()

        def wait() -> None:
            record = store.wait(id, WAKE_TIMEOUT)
            with guard:
                got.append(record)

        waiters = [threading.Thread(target=wait) for _ in range(5)]
        for t in waiters:
            t.start()
        timer = threading.Timer(0.2, lambda: self.writer(store, reopen).store(ResultRecord(id, SUCCESS), self.TTL))
        timer.start()
        timer.join()
        for t in waiters:
            t.join()
        assert len(got) == 5 and all(r is not None and r.state == SUCCESS for r in got)

    def test_wait_gives_up_after_its_timeout(self, store: ResultStore) -> None:
        store.store(ResultRecord("slow", "PROGRESS", meta={"p": 1}), self.TTL)
        got = store.wait("slow", SHORT_TIMEOUT)
        assert got is not None and got.state == "PROGRESS" and not got.ready
        assert store.wait("unknown", SHORT_TIMEOUT) is None
        assert store.wait("unknown", 0) is None

    # -- cancellation ------------------------------------------------------------------------

    def test_cancelled_answers_for_the_subset_cancelled(self, store: ResultStore) -> None:
        store.cancel(["a", "b"], self.TTL)
        store.cancel([], self.TTL)
        assert store.cancelled(["a", "b", "c"]) == {"a", "b"}
        assert store.cancelled(["c"]) == set() and store.cancelled([]) == set()
        store.cancel(["a", "c"], self.TTL)  # again: no error, no duplicate
        assert store.cancelled(["a", "b", "c", "d"]) == {"a", "b", "c"}

    def test_a_cancellation_survives_a_restart(self, store: ResultStore, reopen: Reopen | None) -> None:
        if reopen is None:
            pytest.skip("this store lives and dies with its process")
        store.cancel(["queued"], self.TTL)
        store.close()
        later = reopen()  # a worker started afterwards, or one that was offline at the time
        assert later.cancelled(["queued", "other"]) == {"queued"}

    def test_a_cancellation_expires_and_is_pruned(self, store: ResultStore, clock: FixedClock) -> None:
        store.cancel(["short"], 10)
        store.cancel(["long"], 100)
        clock.advance(11)
        assert store.cancelled(["short", "long"]) == {"long"}
        assert store.prune() == 1
        store.cancel(["long"], 5)  # a shorter cancel never cuts a longer one short
        clock.advance(50)
        assert store.cancelled(["long"]) == {"long"}

    def test_prune_counts_each_kind_it_removes(self, store: ResultStore, clock: FixedClock) -> None:
        for id in ("r1", "r2"):
            store.store(ResultRecord(id, SUCCESS), 10)
        store.store(ResultRecord("r3", SUCCESS), 100)
        store.cancel(["c1"], 10)
        store.cancel(["c2"], 100)
        store.counter_init("k1", 3, 10)
        store.counter_decrement("k1", "m")
        store.counter_init("k2", 3, 100)
        clock.advance(11)
        assert store.prune() == 4
        assert store.prune() == 0
        assert store.get("r3") is not None and store.cancelled(["c2"]) == {"c2"}
        assert store.counter_decrement("k2") == 2
        with pytest.raises(UnknownCounter):
            store.counter_decrement("k1")

    # -- counters ----------------------------------------------------------------------------

    def test_a_counter_counts_down(self, store: ResultStore, clock: FixedClock) -> None:
        store.counter_init("chord:1", 3, self.TTL)
        assert [store.counter_decrement("chord:1") for _ in range(3)] == [2, 1, 0]
        store.counter_init("chord:1", 2, self.TTL)  # init replaces
        assert store.counter_decrement("chord:1") == 1
        with pytest.raises(UnknownCounter, match="chord:2"):
            store.counter_decrement("chord:2")
        store.counter_init("short", 5, 10)
        clock.advance(11)
        with pytest.raises(UnknownCounter):
            store.counter_decrement("short")

    def test_a_member_counts_once(self, store: ResultStore) -> None:
        store.counter_init("chord", 2, self.TTL)
        assert store.counter_decrement("chord", "job-1") == 1
        assert store.counter_decrement("chord", "job-1") == 1  # rerun after a reclaim: not again
        assert store.counter_decrement("chord", "job-2") == 0
        assert store.counter_decrement("chord", "job-2") == 0
        store.counter_init("chord", 1, self.TTL)  # init forgets the members
        assert store.counter_decrement("chord", "job-1") == 0

    def test_decrements_from_many_threads_see_each_value_once(self, store: ResultStore) -> None:
        total = self.THREADS * self.PER_THREAD
        store.counter_init("join", total, self.TTL)
        seen: list[int] = []
        guard = threading.Lock()
        go = threading.Barrier(self.THREADS)

        def work(n: int) -> None:
            go.wait()
            for i in range(self.PER_THREAD):
                member = f"t{n}-{i}" if i % 2 else None
                value = store.counter_decrement("join", member)
                with guard:
                    seen.append(value)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(self.THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(seen) == list(range(total))

    def test_decrements_from_many_processes_see_each_value_once(self, store: ResultStore, clock: FixedClock,
                                                                store_url: StoreUrl | None) -> None:
        if store_url is None:
            pytest.skip("no other process can reach this store")
        url, options = store_url
        total = self.PROCESSES * self.PER_PROCESS
        store.counter_init("join", total, self.TTL)
        ctx = multiprocessing.get_context("spawn")
        start, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=decrement_in_a_process,
                             args=(url, dict(options), clock.now(), "join", self.PER_PROCESS, start, out))
                 for _ in range(self.PROCESSES)]
        for p in procs:
            p.start()
        start.set()
        seen = [value for _ in procs for value in out.get(timeout=120)]
        for p in procs:
            p.join(30)
        assert sorted(seen) == list(range(total))
