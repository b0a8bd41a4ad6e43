"""Running attempts: success, retries with backoff, failure, timeouts, control exceptions, bad messages."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from jobbridge import JobBridge, JobContext, limits, payload, signals
from jobbridge.envelope import Envelope, Reservation
from jobbridge.execution import Executor
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending
from tests.unit import jobs
from tests.unit.jobs import RAN, AsyncJob, Control, Flaky, Later, Notify, Spin


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


@pytest.fixture
def bridge(jobbridge_memory: JobBridge) -> JobBridge:
    jobbridge_memory.register(Notify, Flaky, AsyncJob, Spin, Control, jobs.Rich)
    return jobbridge_memory


def all_queues(bridge: JobBridge) -> list[str]:
    return ["default", "mail"]


def test_success_is_acknowledged(bridge: JobBridge) -> None:
    job_id = bridge.dispatch(Notify(post_id=7))
    stats = bridge.run_pending(all_queues(bridge))
    assert (stats.processed, stats.succeeded) == (1, 1)
    assert RAN == [("notify", (7, 1, "mail"))]
    assert job_id and pending(bridge.driver(), "mail") == 0


def test_retries_with_backoff_then_failed_once(bridge: JobBridge, jobbridge_clock: FixedClock) -> None:
    bridge.dispatch(Flaky(fail_times=99))
    driver = bridge.driver()
    for attempt in (1, 2):
        stats = bridge.run_pending()
        assert stats.released == 1, f"attempt {attempt} should be released"
        assert bridge.run_pending().processed == 0  # backoff: not yet due
        jobbridge_clock.advance(10.01)
    stats = bridge.run_pending()
    assert stats.failed == 1
    assert [r for r in RAN if r[0] == "flaky"] == [("flaky", 1), ("flaky", 2), ("flaky", 3)]
    assert [r[0] for r in RAN].count("flaky.failed") == 1
    (failed,) = driver.failed.list()
    assert failed.name == "tests.flaky" and failed.attempts == 3
    assert failed.error.startswith("ConnectionError: attempt 3 failed")


def test_a_retry_that_succeeds(bridge: JobBridge, jobbridge_clock: FixedClock) -> None:
    bridge.dispatch(Flaky(fail_times=1))
    bridge.run_pending()
    jobbridge_clock.advance(11)
    assert bridge.run_pending().succeeded == 1
    assert bridge.driver().failed.count() == 0


def test_dispatch_tries_override(bridge: JobBridge) -> None:
    bridge.dispatch(Flaky(fail_times=99), tries=1)
    assert bridge.run_pending().failed == 1


def test_pure_python_loop_is_stopped_at_its_timeout(bridge: JobBridge) -> None:
    bridge.dispatch(Spin())
    stats = bridge.run_pending()  # backoff 0: the retry is due at once and runs in the same call
    assert (stats.released, stats.failed) == (1, 1)
    assert RAN == [("spin", 1), ("spin", 2)]
    (failed,) = bridge.driver().failed.list()
    assert failed.error.startswith("JobTimeout: attempt exceeded its timeout of 0.3s")


def test_async_handler_runs_and_is_cancelled_at_its_timeout(bridge: JobBridge) -> None:
    bridge.dispatch(AsyncJob(sleep=0.01))
    bridge.dispatch(AsyncJob(sleep=10))
    stats = bridge.run_pending()
    assert (stats.succeeded, stats.failed) == (1, 1)
    assert RAN == [("async", 0.01)]
    assert "cancelled" in bridge.driver().failed.list()[0].error


def test_release_and_fail_control_exceptions(bridge: JobBridge, jobbridge_clock: FixedClock) -> None:
    bridge.dispatch(Control(action="release"))
    bridge.dispatch(Control(action="fail"))
    stats = bridge.run_pending()
    assert (stats.released, stats.failed) == (1, 1)
    jobbridge_clock.advance(41)
    assert bridge.run_pending().processed == 0
    jobbridge_clock.advance(2)
    assert bridge.run_pending().released == 1  # released again, even past its tries: the job decided


def test_unknown_name_and_bad_payload_fail_at_once_with_the_reason(bridge: JobBridge) -> None:
    driver = bridge.driver()
    now = bridge.clock.now()
    base = dict(queue="default", tries=5, timeout=60.0, available_at=now, created_at=now)
    driver.push([Envelope(id="a", name="nobody.registered", payload={}, **base),  # type: ignore[arg-type]
                 Envelope(id="b", name="tests.notify", payload={"post_id": "x"}, **base)])  # type: ignore[arg-type]
    discarded: list[str] = []

    def receiver(sender: Any, **kw: Any) -> None:
        discarded.append(kw["reason"])

    signals.message_discarded.connect(receiver)
    try:
        stats = bridge.run_pending()
    finally:
        signals.message_discarded.disconnect(receiver)
    assert stats.failed == 2
    errors = {f.id: f.error for f in driver.failed.list()}
    assert "nobody.registered" in errors["a"] and "UnknownJob" in errors["a"]
    assert "post_id: expected int" in errors["b"]
    assert len(discarded) == 2


def test_an_attempt_past_its_tries_is_failed_not_run(bridge: JobBridge) -> None:
    env = bridge.envelope(Notify(post_id=1)).replace(attempts=5)
    outcome = bridge.executor().run(Reservation(env.replace(attempts=6), None, 0.0))
    assert outcome.action == "fail" and "attempts exhausted" in outcome.error
    assert RAN == []


def test_an_attempt_numbered_below_one_is_failed_not_run(bridge: JobBridge) -> None:
    env = bridge.envelope(Notify(post_id=1))
    for attempt in (0, -5):
        outcome = bridge.executor().run(Reservation(env.replace(attempts=attempt), None, 0.0))
        assert (outcome.action, outcome.label) == ("fail", "discarded") and "below 1" in outcome.error
    assert RAN == []


@pytest.mark.parametrize("error", [AttributeError("'int' object has no attribute 'replace'"),
                                   KeyError("sk-live-SECRET"), RecursionError()])
def test_whatever_decoding_raises_the_job_is_failed_once_never_released(
        bridge: JobBridge, monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def broken(cls: type, data: Any) -> Any:
        raise error

    monkeypatch.setattr(payload, "decode", broken)
    bridge.dispatch(Notify(post_id=1))
    stats = bridge.run_pending(all_queues(bridge))
    assert (stats.failed, stats.released) == (1, 0), "a payload that does not decode is a permanent failure"
    (failed,) = bridge.driver().failed.list()
    assert failed.error == (f"PayloadDecodeError: the payload could not be decoded ({type(error).__name__} "
                            "while decoding it)"), "the type only: another's message may quote the value"
    assert RAN == []


def test_a_release_delay_is_clamped_to_what_a_store_can_hold(bridge: JobBridge) -> None:
    bridge.register(Later)
    for asked, kept in ((1e12, limits.MAX_RELEASE_DELAY), (math.inf, limits.MAX_RELEASE_DELAY),
                        (math.nan, 0.0), (-3.0, 0.0), (5.0, 5.0)):
        env = bridge.envelope(Later(delay=0.0)).replace(payload={"delay": asked}, attempts=1)
        outcome = bridge.executor().run(Reservation(env, None, 0.0))
        assert (outcome.action, outcome.delay) == ("release", kept), asked


def test_signals_carry_the_job_class_and_errors(bridge: JobBridge, jobbridge_clock: FixedClock) -> None:
    seen: list[tuple[str, Any]] = []

    def on(name: str) -> Any:
        def receiver(sender: Any, **kw: Any) -> None:
            seen.append((name, sender))
            if name == "failed":
                assert isinstance(kw["exception"], ConnectionError) and kw["error"].startswith("ConnectionError")
        return receiver

    handlers = {s: on(n) for s, n in ((signals.job_processing, "processing"), (signals.job_released, "released"),
                                      (signals.job_failed, "failed"), (signals.job_processed, "processed"))}
    def broken(sender: Any, **kw: Any) -> None:
        raise ZeroDivisionError("a broken receiver is logged, not fatal")

    for sig, fn in handlers.items():
        sig.connect(fn, sender=Flaky)
    signals.job_processed.connect(broken)
    try:
        bridge.dispatch(Flaky(fail_times=1), tries=1)
        bridge.dispatch(Notify(post_id=1))
        bridge.run_pending(all_queues(bridge))
    finally:
        for sig, fn in handlers.items():
            sig.disconnect(fn)
        signals.job_processed.disconnect(broken)
    assert seen == [("processing", Flaky), ("failed", Flaky)]


def test_run_inline_retries_at_once_then_raises(bridge: JobBridge) -> None:
    with pytest.raises(ConnectionError, match="attempt 3"):
        bridge.dispatch_now(Flaky(fail_times=5))
    assert [r for r in RAN if r[0] == "flaky"] == [("flaky", 1), ("flaky", 2), ("flaky", 3)]
    bridge.dispatch_now(Flaky(fail_times=1))


def test_scoped_bindings_are_flushed_between_jobs(bridge: JobBridge) -> None:
    made: list[object] = []

    class Session:
        closed = False

        def close(self) -> None:
            self.closed = True

    def make(_: Any) -> Session:
        made.append(Session())
        return made[-1]  # type: ignore[return-value]

    bridge.container.scoped(Session, make)

    def grab(ctx: JobContext, call_next: Any) -> Any:
        assert ctx.resolve(Session) is ctx.resolve(Session)
        return call_next()

    executor = Executor(bridge.registry, bridge.container, middleware=[grab])
    for n in range(2):
        res = bridge.driver().reserve(["mail"], 1) or None
        if res is None:
            bridge.dispatch(Notify(post_id=n))
            res = bridge.driver().reserve(["mail"], 1)
        Executor.settle(bridge.driver(), [executor.run(res[0])])
    assert len(made) == 2 and all(s.closed for s in made)  # type: ignore[attr-defined]


def test_a_failjob_that_stands_for_its_cause_stores_that_error(bridge: JobBridge) -> None:
    from jobbridge import FailJob, Job

    class Carrier(FailJob):
        stands_for_cause = True

    class Wraps(Job, name="tests.wraps", tries=1):
        def handle(self, ctx: JobContext) -> None:
            try:
                {}["missing"]
            except KeyError as exc:
                raise Carrier("gave up") from exc

    bridge.register(Wraps)
    bridge.dispatch(Wraps())
    assert bridge.run_pending().failed == 1
    (failed,) = bridge.driver().failed.list()
    assert failed.error.startswith("KeyError: 'missing'")
