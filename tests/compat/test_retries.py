"""Inside a task: self.retry, autoretry_for with Celery's backoff, failures, Ignore, Reject, self.request."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from jobbridge.compat import Celery, Ignore, MaxRetriesExceededError, Reject, Task
from jobbridge.compat.running.tracing import backoff_countdown

from jobbridge.execution import Executor
from jobbridge.testing import FixedClock
from jobbridge.testing.contract import pending

from .conftest import Recorder

calls: list[Any] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    calls.clear()


def run(app: Celery, queue: str = "celery") -> Any:
    return app.jobbridge_app().run_pending([queue])


def driver(app: Celery) -> Any:
    return app.jobbridge_app().driver()


def test_retry_releases_the_message_after_its_countdown(app: Celery, clock: FixedClock) -> None:
    @app.task(bind=True, default_retry_delay=30)
    def flaky(self: Task, n: int) -> str:
        calls.append((self.request.retries, self.request.id))
        if self.request.retries < 2:
            raise self.retry()
        return "done"

    result = flaky.delay(1)
    assert run(app).released == 1
    clock.advance(29)
    assert run(app).processed == 0
    clock.advance(2)
    assert run(app).released == 1
    clock.advance(31)
    assert run(app).succeeded == 1
    assert calls == [(0, result.id), (1, result.id), (2, result.id)]
    assert pending(driver(app), "celery") == 0


def test_exhausted_retries_raise_max_retries_exceeded_and_fail_the_job(app: Celery, clock: FixedClock,
                                                                      recorder: Recorder) -> None:
    @app.task(bind=True, max_retries=1)
    def hopeless(self: Task) -> None:
        calls.append(self.request.retries)
        raise self.retry(countdown=1)

    hopeless.delay()
    run(app)
    clock.advance(2)
    stats = run(app)
    assert calls == [0, 1] and stats.failed == 1
    (failure,) = recorder.of("task_failure")
    assert isinstance(failure["exception"], MaxRetriesExceededError)
    (failed,) = driver(app).failed.list(10)
    assert "MaxRetriesExceededError" in failed.error


def test_exhausted_retries_reraise_the_given_exception(app: Celery, clock: FixedClock,
                                                      recorder: Recorder) -> None:
    @app.task(bind=True, max_retries=0)
    def once(self: Task) -> None:
        try:
            raise ConnectionError("down")
        except ConnectionError as exc:
            raise self.retry(exc=exc, countdown=1) from exc

    once.delay()
    assert run(app).failed == 1
    (failure,) = recorder.of("task_failure")
    assert isinstance(failure["exception"], ConnectionError)


def test_an_exception_fails_the_task_at_once_without_retry(app: Celery, recorder: Recorder) -> None:
    @app.task
    def broken() -> None:
        calls.append("ran")
        raise ValueError("bad input")

    broken.delay()
    stats = run(app)
    assert stats.failed == 1 and calls == ["ran"]
    (failed,) = driver(app).failed.list(10)
    assert "ValueError: bad input" in failed.error
    assert recorder.names()[-3:] == ["task_prerun", "task_failure", "task_postrun"]
    assert recorder.of("task_postrun")[0]["state"] == "FAILURE"


def test_autoretry_uses_celerys_exponential_backoff(app: Celery, clock: FixedClock) -> None:
    @app.task(bind=True, autoretry_for=(ConnectionError,), retry_backoff=2, retry_backoff_max=5,
              retry_jitter=False, max_retries=4)
    def fetch(self: Task) -> None:
        calls.append(clock.now())
        raise ConnectionError("refused")

    fetch.delay()
    bridge = app.jobbridge_app()
    delays = []
    while len(delays) < 5:
        got = bridge.driver().reserve(["celery"], 1)
        assert got, "the released job is due"
        outcome = bridge.executor().run(got[0])
        Executor.settle(bridge.driver(), [outcome])
        delays.append((outcome.action, outcome.delay))
        clock.advance(outcome.delay)
    assert delays == [("release", 2.0), ("release", 4.0), ("release", 5.0), ("release", 5.0), ("fail", 0.0)]


def test_backoff_with_full_jitter_stays_within_the_cap() -> None:
    task = mock.Mock(retry_backoff=True, retry_backoff_max=600, retry_jitter=True)
    for retries in range(12):
        assert 0 <= backoff_countdown(task, retries) <= min(600, 2 ** retries)
    task.retry_jitter = False
    assert [backoff_countdown(task, r) for r in range(4)] == [1, 2, 4, 8]


def test_dont_autoretry_for_and_retry_kwargs(app: Celery, clock: FixedClock) -> None:
    @app.task(bind=True, autoretry_for=(Exception,), dont_autoretry_for=(KeyError,),
              retry_kwargs={"countdown": 7, "max_retries": 1})
    def picky(self: Task, kind: str) -> None:
        calls.append((kind, self.request.retries))
        raise KeyError(kind) if kind == "key" else OSError(kind)

    picky.delay("key")
    assert run(app).failed == 1
    picky.delay("os")
    assert run(app).released == 1
    clock.advance(7)
    assert run(app).failed == 1
    assert calls == [("key", 0), ("os", 0), ("os", 1)]


def test_retry_with_new_arguments_sends_a_new_message_with_the_same_id(app: Celery, clock: FixedClock) -> None:
    @app.task(bind=True)
    def walk(self: Task, step: int) -> None:
        calls.append((step, self.request.retries, self.request.id))
        if step < 2:
            raise self.retry(args=[step + 1], countdown=1)

    result = walk.delay(0)
    for _ in range(3):
        run(app)
        clock.advance(1)
    assert calls == [(0, 0, result.id), (1, 1, result.id), (2, 2, result.id)]


def test_retry_beyond_the_messages_tries_is_sent_again(app: Celery, clock: FixedClock) -> None:
    @app.task(bind=True, max_retries=1)
    def persistent(self: Task) -> None:
        calls.append(self.request.retries)
        if self.request.retries < 4:
            raise self.retry(countdown=1, max_retries=10)

    persistent.delay()
    for _ in range(6):
        run(app)
        clock.advance(1)
    assert calls == [0, 1, 2, 3, 4]
    assert driver(app).failed.count() == 0


def test_retry_throw_false_sends_the_retry_and_lets_the_task_finish(app: Celery, clock: FixedClock) -> None:
    @app.task(bind=True)
    def soft(self: Task) -> str:
        calls.append(self.request.retries)
        if self.request.retries == 0:
            self.retry(countdown=1, throw=False)
        return "ok"

    soft.delay()
    assert run(app).succeeded == 1
    clock.advance(1)
    assert run(app).succeeded == 1
    assert calls == [0, 1]


def test_retry_signals_and_hooks(app: Celery, clock: FixedClock, recorder: Recorder) -> None:
    hooks: list[str] = []

    class Base(Task):
        def on_retry(self, exc: Any, task_id: Any, args: Any, kwargs: Any, einfo: Any) -> None:
            hooks.append(f"on_retry:{exc}")

        def after_return(self, status: str, *args: Any) -> None:
            hooks.append(f"after_return:{status}")

    @app.task(bind=True, base=Base)
    def once(self: Task) -> None:
        if not self.request.retries:
            raise self.retry(exc=RuntimeError("wait"), countdown=1)

    once.delay()
    run(app)
    clock.advance(1)
    run(app)
    assert hooks == ["on_retry:wait", "after_return:SUCCESS"]
    (retry,) = recorder.of("task_retry")
    assert retry["request"].retries == 0 and "wait" in str(retry["reason"])
    assert [k["state"] for k in recorder.of("task_postrun")] == ["RETRY", "SUCCESS"]


def test_ignore_acknowledges_without_success(app: Celery, recorder: Recorder) -> None:
    @app.task
    def skip() -> None:
        raise Ignore()

    skip.delay()
    stats = run(app)
    assert stats.processed == 1 and driver(app).failed.count() == 0
    assert recorder.of("task_postrun")[0]["state"] == "IGNORED"
    assert recorder.of("task_success") == [] and recorder.of("task_failure") == []


def test_reject_fails_or_requeues(app: Celery) -> None:
    @app.task(bind=True)
    def refuse(self: Task, requeue: bool) -> None:
        calls.append(self.request.retries)
        if not self.request.retries:
            raise Reject("not now", requeue=requeue)

    refuse.delay(False)
    assert run(app).failed == 1
    assert driver(app).failed.list(10)[0].error.startswith("Reject: ('not now', False)")
    refuse.delay(True)
    stats = run(app)
    assert stats.released == 1 and stats.succeeded == 1


def test_the_request_describes_the_message(app: Celery, clock: FixedClock) -> None:
    @app.task(bind=True, time_limit=60, soft_time_limit=30)
    def show(self: Task, a: int, b: int = 0) -> None:
        r = self.request
        calls.append({
            "id": r.id, "retries": r.retries, "is_eager": r.is_eager, "called_directly": r.called_directly,
            "hostname": r.hostname, "routing_key": r.delivery_info["routing_key"], "args": r.args,
            "kwargs": r.kwargs, "headers": r.headers, "timelimit": r.timelimit, "task": r.task,
        })

    result = show.apply_async((1,), {"b": 2}, queue="q1", headers={"x": 1})
    run(app, "q1")
    (req,) = calls
    assert req["id"] == result.id and req["retries"] == 0 and req["is_eager"] is False
    assert req["called_directly"] is False and req["hostname"]
    assert req["routing_key"] == "q1" and req["args"] == [1] and req["kwargs"] == {"b": 2}
    assert req["headers"] == {"x": 1} and req["timelimit"] == (60, 30) and req["task"] == show.name


def test_retry_outside_a_worker_raises_the_exception(app: Celery) -> None:
    @app.task(bind=True)
    def direct(self: Task) -> None:
        raise self.retry(exc=LookupError("nope"))

    with pytest.raises(LookupError):
        direct()


def test_soft_limit_must_not_exceed_the_hard_limit(app: Celery) -> None:
    @app.task(time_limit=5, soft_time_limit=10)  # accepted where it is declared, as in Celery
    def wrong() -> None: ...

    with pytest.raises(ValueError, match="soft_time_limit must be less than or equal to time_limit"):
        wrong.delay()  # refused when it is sent
