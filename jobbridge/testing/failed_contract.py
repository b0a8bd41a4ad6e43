"""`FailedStoreContract`: what ``driver.failed`` must do (see `jobbridge.testing.contract` for how to use the suites).

``fail`` moves a job here; an operator lists (filtered by queue, job, time and
error text), reads, retries, flushes and, where the store can, forgets chosen
jobs: the CLI's ``failed``, ``failed show``, ``retry`` and ``flush``, and the
dashboard's Delete.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobbridge.drivers.base import Driver, FailedFilter, FailedStore, ForgettingFailedStore
from jobbridge.envelope import Envelope
from jobbridge.errors import NoFailedJob
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract_support import ContractHelpers, pending


class FailedStoreContract(ContractHelpers):
    """``driver.failed``, required of every driver: where `fail` keeps a job, and what an operator does there."""

    def test_has_a_failed_store(self, driver: Driver) -> None:
        assert isinstance(driver.failed, FailedStore)

    def test_fail_moves_the_job_to_the_failed_store(self, driver: Driver, clock: FixedClock) -> None:
        (env,) = self.push(driver, clock)
        driver.fail(self.reserve_one(driver), "boom: it broke")
        assert pending(driver, "default") == 0
        assert driver.failed.count() == 1
        (failed,) = driver.failed.list(10)
        assert (failed.id, failed.queue, failed.name) == (env.id, "default", env.name)
        assert failed.attempts == 1 and failed.error == "boom: it broke"
        assert Envelope.decode(failed.body).id == env.id
        clock.advance(self.RESERVATION * 2)
        driver.reclaim_expired()
        assert driver.reserve(["default"], 1) == []

    def test_retry_failed_puts_it_back_with_attempts_reset(self, driver: Driver, clock: FixedClock) -> None:
        (env,) = self.push(driver, clock)
        driver.fail(self.reserve_one(driver), "x")
        assert driver.failed.retry(env.id) == 1
        assert driver.failed.count() == 0
        again = self.reserve_one(driver)
        assert again.id == env.id and again.attempt == 1

    def test_retry_all_and_flush(self, driver: Driver, clock: FixedClock) -> None:
        self.push(driver, clock, n=3)
        for res in driver.reserve(["default"], 3):
            driver.fail(res, "x")
        assert driver.failed.retry("all") == 3
        for res in driver.reserve(["default"], 3):
            driver.fail(res, "y")
        assert driver.failed.count() == 3
        assert driver.failed.flush() == 3
        assert driver.failed.list(10) == []

    def test_get_reads_one_failed_job_whole(self, driver: Driver, clock: FixedClock) -> None:
        (env,) = self.push(driver, clock, queue="other")
        error = "ValueError: no such invoice\nTraceback (most recent call last):\n  File ...\nValueError: 7"
        driver.fail(self.reserve_one(driver, ("other",)), error)
        found = driver.failed.get(env.id)
        assert found is not None and (found.id, found.queue, found.error) == (env.id, "other", error)
        assert Envelope.decode(found.body).id == env.id
        assert driver.failed.get("no-such-id") is None

    def test_list_filters_by_queue_name_and_time(self, driver: Driver, clock: FixedClock) -> None:
        first = self.push(driver, clock, queue="high", name="mail.send") + self.push(driver, clock, queue="low")
        for res in driver.reserve(["high", "low"], 2):
            driver.fail(res, "x")
        clock.advance(100)
        since = clock.now()
        (late,) = self.push(driver, clock, queue="high")
        driver.fail(self.reserve_one(driver, ("high",)), "y")

        def ids(**where: Any) -> set[str]:
            return {job.id for job in driver.failed.list(10, FailedFilter(**where))}

        assert ids(queue="high") == {first[0].id, late.id}
        assert ids(name="mail.send") == {first[0].id}
        assert ids(since=since) == {late.id}
        assert ids(queue="low", since=since) == set()
        assert ids() == {first[0].id, first[1].id, late.id}
        assert [job.id for job in driver.failed.list(1, FailedFilter(queue="high"))] == [late.id]

    def fail_with(self, driver: Driver, clock: FixedClock, errors: list[str], **kw: Any) -> list[str]:
        """One failed job per error text, each 10 s after the one before; their ids, oldest first."""
        ids = []
        for error in errors:
            (env,) = self.push(driver, clock, **kw)
            driver.fail(self.reserve_one(driver, (env.queue,)), error)
            ids.append(env.id)
            clock.advance(10)
        return ids

    def test_list_until_is_an_inclusive_end(self, driver: Driver, clock: FixedClock) -> None:
        start = clock.now()
        old, middle, new = self.fail_with(driver, clock, ["a", "b", "c"])

        def ids(**where: Any) -> list[str]:
            return [job.id for job in driver.failed.list(10, FailedFilter(**where))]

        assert ids(until=start + 10) == [middle, old], "at or before, the newest first"
        assert ids(until=start + 9.5) == [old]
        assert ids(until=start - 1) == []
        assert ids(since=start + 5, until=start + 15) == [middle]
        assert [job.id for job in driver.failed.list(1, FailedFilter(until=start + 25))] == [new]

    def test_list_filters_by_error_text_ignoring_case(self, driver: Driver, clock: FixedClock) -> None:
        smtp, percent, path, zurich = self.fail_with(driver, clock, [
            "ConnectionError: the SMTP server closed\nTraceback (most recent call last):\n  File ...",
            "ValueError: 100% of 5_items",
            "OSError: /srv/app/spool is full",
            "RuntimeError: Zürich's relay said no"])

        def ids(**where: Any) -> set[str]:
            return {job.id for job in driver.failed.list(10, FailedFilter(**where))}

        assert ids(error="smtp SERVER") == {smtp}
        assert ids(error="Error") == {smtp, percent, path, zurich}
        assert ids(error="zürich's RELAY") == ids(error="RELAY said") == {zurich}, "beside other characters"
        assert ids(error="most recent call") == {smtp}, "anywhere in the text, the traceback included"
        assert ids(error="%") == ids(error="0% of") == {percent}, "% is a character, not a wildcard"
        assert ids(error="_") == ids(error="5_i") == {percent}, "_ is a character, not a wildcard"
        assert ids(error="/srv/") == {path}
        assert ids(error="no such text") == set()
        assert ids(error="error", since=clock.now() - 15) == {zurich}
        assert [job.id for job in driver.failed.list(2, FailedFilter(error="Error"))] == [zurich, path]

    def test_forget_deletes_the_chosen_failed_jobs(self, driver: Driver, clock: FixedClock) -> None:
        if not isinstance(driver.failed, ForgettingFailedStore):
            pytest.skip("this driver's failed store cannot delete chosen jobs")
        first, second, third = self.fail_with(driver, clock, ["a", "b", "c"])
        assert driver.failed.forget([]) == 0
        forgotten = driver.failed.forget([first, third, "no-such-id"])
        assert forgotten == 2, f"forget said {forgotten}: an id the store does not hold is skipped, uncounted"
        assert driver.failed.count() == 1 and driver.failed.get(first) is None
        assert [job.id for job in driver.failed.list(10)] == [second]
        assert driver.failed.forget([first]) == 0, "already gone"
        assert driver.failed.retry(second) == 1

    def test_retry_of_an_unknown_id_names_it(self, driver: Driver) -> None:
        with pytest.raises(NoFailedJob, match="no-such-id"):
            driver.failed.retry("no-such-id")

    def test_an_undecodable_body_is_handed_out_to_be_failed(self, driver: Driver, clock: FixedClock) -> None:
        inject = type(self).inject_undecodable
        if inject is None:
            pytest.skip("this driver stores envelopes, never raw bodies")
        inject(self, driver, "default", b"\x00not json")
        res = self.reserve_one(driver)
        assert res.decode_error
        driver.fail(res, res.decode_error)
        (failed,) = driver.failed.list(1)
        assert failed.body == b"\x00not json" and failed.error == res.decode_error
