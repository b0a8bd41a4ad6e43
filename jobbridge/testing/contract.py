"""The driver contract: what a driver must do against its real store, as three suites it opts into.

The port has three parts (`jobbridge.drivers.base`), and so has the contract:

- `DriverContract`, required: the reservation protocol (push, reserve,
  acknowledge, release, fail, extend, reclaim_expired, counts), which the
  worker runs on, and ``purge`` (``jobbridge purge``);
- `FailedStoreContract`, required: ``driver.failed``, where `fail` moves a job
  and from which an operator lists (filtered), reads, retries and flushes (the
  CLI's ``failed``, ``failed show``, ``retry`` and ``flush``);
- `AcknowledgingReserveContract`, optional (`jobbridge.testing.combined_contract`):
  ``acknowledge_and_reserve`` for a driver that offers it;
- `LockStoreContract`, optional: ``driver.locks`` for unique jobs, for a driver
  whose locks are shared by every process (``locks.shared``). A driver with no
  lock to give says ``shared = False`` instead, and the app dispatches unique
  jobs with a warning; it does not run this suite.

Use them from a test module by subclassing those that apply (``class
TestMyDriver(DriverContract, FailedStoreContract, LockStoreContract)``) and
providing two fixtures: ``clock`` (a `FixedClock`) and ``driver`` (an empty
driver built on that clock, with ``reservation`` = `DriverContract.RESERVATION`).
A driver that can hand out a body it cannot decode also defines
``inject_undecodable``; one whose store cannot purge sets ``purge_refused``, one
that cannot see delayed jobs to purge them ``purges_delayed = False``. No test
sleeps: leases and delays are crossed by advancing the clock.
"""

from __future__ import annotations

import threading
from typing import ClassVar

import pytest

from jobbridge.drivers.base import Capabilities, Driver, LockStore
from jobbridge.envelope import Reservation
from jobbridge.errors import StoreRefused
from jobbridge.testing.cancellations_contract import ReadsCancellationsContract
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.combined_contract import AcknowledgingReserveContract
from jobbridge.testing.contract_support import ContractHelpers, make_envelope, pending
from jobbridge.testing.failed_contract import FailedStoreContract

__all__ = ["AcknowledgingReserveContract", "ContractHelpers", "DriverContract", "FailedStoreContract",
           "LockStoreContract", "ReadsCancellationsContract", "make_envelope", "pending"]


class DriverContract(ContractHelpers):
    """The reservation protocol, required of every driver: what the worker relies on."""

    #: whether jobs on one queue come out in the order they became available
    ordered: ClassVar[bool] = True

    def test_declares_capabilities(self, driver: Driver) -> None:
        assert isinstance(driver.capabilities, Capabilities)
        assert isinstance(driver, Driver)

    def test_push_then_reserve_hands_out_the_envelope(self, driver: Driver, clock: FixedClock) -> None:
        (env,) = self.push(driver, clock, payload={"a": [1, "x"], "b": None})
        res = self.reserve_one(driver)
        assert res.envelope.id == env.id and res.envelope.name == env.name
        assert dict(res.envelope.payload) == {"a": [1, "x"], "b": None}
        assert res.envelope.attempts == 1 and res.attempt == 1
        assert res.lease_until >= clock.now() + self.RESERVATION - 1
        assert res.decode_error is None

    def test_reserved_job_is_invisible_to_other_reserves(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock)
        self.reserve_one(driver)
        assert driver.reserve(["default"], 10) == []
        assert pending(driver, "default") == 1

    def test_acknowledge_removes_the_job_for_good(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock, n=3)
        got = driver.reserve(["default"], 3)
        driver.acknowledge(got)
        assert pending(driver, "default") == 0
        clock.advance(self.RESERVATION * 3)
        assert driver.reclaim_expired() == 0
        assert driver.reserve(["default"], 10) == []

    def test_delayed_job_waits_for_its_time(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock, delay=30)
        assert driver.reserve(["default"], 1) == []
        clock.advance(29)
        assert driver.reserve(["default"], 1) == []
        clock.advance(2)
        assert self.reserve_one(driver).attempt == 1

    def test_queues_are_emptied_in_priority_order(self, driver: Driver, clock: FixedClock) -> None:
        low = self.push(driver, clock, n=2, queue="low")
        high = self.push(driver, clock, n=2, queue="high")
        got = driver.reserve(["high", "low"], 3)
        assert [r.envelope.queue for r in got] == ["high", "high", "low"]
        assert {r.id for r in got} == {high[0].id, high[1].id} | {r.id for r in got if r.envelope.queue == "low"}
        assert got[2].id in {e.id for e in low}

    def test_reserve_takes_only_the_queues_named(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock, queue="other")
        assert driver.reserve(["default"], 5) == []
        assert pending(driver, "other") == 1 and pending(driver, "default") == 0

    def test_reserve_respects_the_limit(self, driver: Driver, clock: FixedClock) -> None:
        envs = self.push(driver, clock, n=5)
        first = driver.reserve(["default"], 3)
        second = driver.reserve(["default"], 3)
        assert len(first) == 3 and len(second) == 2
        assert {r.id for r in first + second} == {e.id for e in envs}

    def test_jobs_come_out_in_order(self, driver: Driver, clock: FixedClock) -> None:
        if not self.ordered:
            pytest.skip("this driver does not promise order within a queue")
        ids = []
        for _ in range(5):
            ids += [e.id for e in self.push(driver, clock)]
            clock.advance(0.01)
        assert [r.id for r in driver.reserve(["default"], 5)] == ids

    def test_release_makes_the_job_available_after_its_delay(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock)
        driver.release(self.reserve_one(driver), 10)
        assert driver.reserve(["default"], 1) == []
        assert pending(driver, "default") == 1
        clock.advance(11)
        again = self.reserve_one(driver)
        assert again.attempt == 2

    def test_release_without_delay_is_available_at_once(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock)
        driver.release(self.reserve_one(driver), 0)
        assert self.reserve_one(driver).attempt == 2

    def test_hand_back_counts_no_attempt(self, driver: Driver, clock: FixedClock) -> None:
        # a job that waited for its rate limit's turn never started: handing it back spends no try
        self.push(driver, clock)
        first = self.reserve_one(driver)
        assert first.attempt == 1
        driver.hand_back(first, 10)
        assert driver.reserve(["default"], 1) == []
        assert pending(driver, "default") == 1
        clock.advance(11)
        again = self.reserve_one(driver)
        assert again.id == first.id and again.attempt == 1
        driver.hand_back(again, 0)
        third = self.reserve_one(driver)
        assert third.attempt == 1
        driver.release(third, 0)  # a real attempt after it counts as before
        assert self.reserve_one(driver).attempt == 2

    def test_a_stale_hand_back_changes_nothing(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock)
        stale = self.reserve_one(driver)
        clock.advance(self.RESERVATION + 1)
        assert driver.reclaim_expired() == 1
        fresh = self.reserve_one(driver)
        driver.hand_back(stale, 0)
        assert driver.reserve(["default"], 1) == []
        assert [r.id for r in driver.extend([fresh], self.RESERVATION)] == [fresh.id]
        driver.acknowledge([fresh])
        assert pending(driver, "default") == 0

    def test_extend_keeps_a_running_job_reserved(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock)
        res = self.reserve_one(driver)
        for _ in range(4):
            clock.advance(self.RESERVATION * 0.75)
            kept = driver.extend([res], self.RESERVATION)
            assert [r.id for r in kept] == [res.id]
            assert kept[0].lease_until >= clock.now() + self.RESERVATION - 1
            assert driver.reclaim_expired() == 0
            assert driver.reserve(["default"], 1) == []
        driver.acknowledge([kept[0]])
        assert pending(driver, "default") == 0

    def test_a_lapsed_reservation_is_reclaimed_as_a_new_attempt(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock)
        stale = self.reserve_one(driver)
        clock.advance(self.RESERVATION + 1)
        assert driver.reclaim_expired() == 1
        fresh = self.reserve_one(driver)
        assert fresh.id == stale.id and fresh.attempt == 2
        # the worker that lost the lease cannot take it back by heartbeat
        assert driver.extend([stale], self.RESERVATION) == []
        driver.acknowledge([fresh])
        assert pending(driver, "default") == 0

    def test_a_stale_reservation_settles_nothing(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock, n=3)
        stale = driver.reserve(["default"], 3)
        clock.advance(self.RESERVATION + 1)
        assert driver.reclaim_expired() == 3
        fresh = {r.id: r for r in driver.reserve(["default"], 3)}
        assert set(fresh) == {r.id for r in stale}
        # the worker that lost its leases finishes late: none of it may touch the new holders' jobs
        driver.acknowledge([stale[0]])
        driver.release(stale[1], 0)
        driver.fail(stale[2], "late")
        assert pending(driver, "default") == 3
        assert driver.failed.count() == 0
        assert driver.reserve(["default"], 3) == []
        assert {r.id for r in driver.extend(list(fresh.values()), self.RESERVATION)} == set(fresh)
        driver.acknowledge(list(fresh.values()))
        assert pending(driver, "default") == 0

    def test_a_blocking_reserve_wakes_on_a_push(self, driver: Driver, clock: FixedClock) -> None:
        if not driver.capabilities.blocking_reserve:
            pytest.skip("this driver does not wait in reserve; the worker sleeps instead")
        got: list[Reservation] = []
        waiter = threading.Thread(target=lambda: got.extend(driver.reserve(["default"], 1, wait=30)))
        waiter.start()
        waiter.join(0.3)  # let it block first
        (env,) = self.push(driver, clock)
        waiter.join(20)
        assert not waiter.is_alive(), "reserve(wait=30) did not wake on a push"
        assert [r.id for r in got] == [env.id]

    def test_reclaim_leaves_live_reservations_alone(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock)
        self.reserve_one(driver)
        clock.advance(self.RESERVATION / 2)
        assert driver.reclaim_expired() == 0
        assert driver.reserve(["default"], 1) == []

    def test_counts_by_state(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock, n=2)
        self.push(driver, clock, n=1, delay=100)
        self.reserve_one(driver)
        counts = {c.queue: c for c in driver.counts()}["default"]
        assert (counts.ready, counts.delayed, counts.reserved) == (1, 1, 1)
        assert pending(driver, "default") == 3

    def test_purge_deletes_the_waiting_jobs_and_never_a_reserved_one(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock, n=3, queue="low")
        self.push(driver, clock, n=1, queue="low", delay=100)
        self.push(driver, clock, n=2, queue="other")
        running = self.reserve_one(driver, ("low",))
        if self.purge_refused:
            with pytest.raises(StoreRefused, match="cannot purge"):
                driver.purge(["low"])
            assert pending(driver, "low") == 4
            return
        assert driver.purge(["low"]) == (3 if self.purges_delayed else 2)
        assert pending(driver, "low") == (1 if self.purges_delayed else 2)
        assert pending(driver, "other") == 2
        assert [r.id for r in driver.extend([running], self.RESERVATION)] == [running.id]
        driver.acknowledge([running])
        assert driver.reserve(["low"], 10) == []
        assert driver.purge(["high"]) == 0

    def test_push_many_in_one_call(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock, n=500)
        assert pending(driver, "default") == 500
        seen: set[str] = set()
        while got := driver.reserve(["default"], 100):
            seen.update(r.id for r in got)
            driver.acknowledge(got)
        assert len(seen) == 500

    def test_concurrent_reserves_never_share_a_job(self, driver: Driver, clock: FixedClock) -> None:
        envs = self.push(driver, clock, n=300)
        taken: list[str] = []
        guard = threading.Lock()

        def drain() -> None:
            while got := driver.reserve(["default"], 7):
                with guard:
                    taken.extend(r.id for r in got)

        threads = [threading.Thread(target=drain) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(taken) == sorted(e.id for e in envs)


class LockStoreContract(ContractHelpers):
    """``driver.locks`` shared by every process, optional: one holder per unique key until released or expired."""

    def test_has_a_shared_lock_store(self, driver: Driver) -> None:
        assert isinstance(driver.locks, LockStore)
        assert driver.locks.shared, "a driver whose locks are not shared does not run this suite"

    def test_unique_lock_is_held_until_released_or_expired(self, driver: Driver, clock: FixedClock) -> None:
        assert driver.locks.acquire("job:invoice:7", "a", 100)
        assert not driver.locks.acquire("job:invoice:7", "b", 100)
        assert driver.locks.acquire("job:user:7", "b", 100)
        driver.locks.release("job:invoice:7", "b")  # not b's lock: stays
        assert not driver.locks.acquire("job:invoice:7", "c", 100)
        driver.locks.release("job:invoice:7", "a")
        assert driver.locks.acquire("job:invoice:7", "c", 100)
        clock.advance(101)
        assert driver.locks.acquire("job:invoice:7", "d", 100)

    def test_a_purged_unique_job_leaves_no_lock_behind(self, driver: Driver, clock: FixedClock) -> None:
        if self.purge_refused:
            pytest.skip("this driver refuses purge")
        (env,) = self.push(driver, clock, queue="low", unique_key="job:report:1", unique_for=3600.0)
        assert driver.locks.acquire("job:report:1", env.id, 3600)
        assert driver.locks.acquire("job:report:2", "someone-else", 3600)
        assert driver.purge(["low"]) == 1
        assert driver.locks.acquire("job:report:1", "the-next-dispatch", 3600)
        assert not driver.locks.acquire("job:report:2", "a-third", 3600)  # another job's lock stays
