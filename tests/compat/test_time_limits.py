"""Time limits: SoftTimeLimitExceeded raised inside the task at the soft limit; the hard limit fails it."""

from __future__ import annotations

import time
from typing import Any

from jobbridge.compat import Celery, SoftTimeLimitExceeded, TimeLimitExceeded

from .conftest import Recorder

seen: list[Any] = []


def test_the_soft_limit_raises_inside_the_task_which_may_clean_up(app: Celery) -> None:
    seen.clear()

    @app.task(soft_time_limit=0.2, time_limit=10)
    def slow() -> str:
        try:
            for _ in range(200):
                time.sleep(0.01)
        except SoftTimeLimitExceeded:
            seen.append("cleaned up")
            return "partial"
        return "full"

    slow.delay()
    stats = app.jobbridge_app().run_pending(["celery"])
    assert stats.succeeded == 1 and seen == ["cleaned up"]


def test_an_uncaught_soft_limit_fails_the_task(app: Celery, recorder: Recorder) -> None:
    @app.task(soft_time_limit=0.1)
    def slow() -> None:
        for _ in range(200):
            time.sleep(0.01)

    slow.delay()
    assert app.jobbridge_app().run_pending(["celery"]).failed == 1
    (failure,) = recorder.of("task_failure")
    assert isinstance(failure["exception"], SoftTimeLimitExceeded)


def test_the_soft_limit_never_fires_after_the_task_returned(app: Celery) -> None:
    @app.task(soft_time_limit=0.05)
    def quick() -> str:
        return "ok"

    quick.delay()
    assert app.jobbridge_app().run_pending(["celery"]).succeeded == 1
    time.sleep(0.1)  # a stray exception would surface here


def test_the_hard_limit_stops_the_task_and_fails_it(app: Celery, recorder: Recorder) -> None:
    @app.task(time_limit=0.2)
    def stuck() -> None:
        while True:
            time.sleep(0.01)

    stuck.delay()
    stats = app.jobbridge_app().run_pending(["celery"])
    assert stats.failed == 1
    (failure,) = recorder.of("task_failure")
    assert isinstance(failure["exception"], TimeLimitExceeded)
    (failed,) = app.jobbridge_app().driver().failed.list(10)
    assert "TimeLimitExceeded" in failed.error
