"""Celery's ``rate_limit`` on the facade: per task, ``task_default_rate_limit``, ``worker_disable_rate_limits``,
and a worker that starts a limited task no more often than its rate while other tasks run at once."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from jobbridge.compat import Celery, RefusedFeature, Task

from jobbridge.errors import JobDefinitionError
from jobbridge.job import options_of
from jobbridge.rate_limits import RateLimit
from jobbridge.worker import Worker, WorkerOptions


def limit_of(app: Celery, name: str) -> RateLimit | None:
    return options_of(app.jobbridge_app().registry.get(name)).rate_limit


def test_a_task_rate_limit_is_its_jobs_limit(app: Celery) -> None:
    @app.task(name="t.mail", rate_limit="50/m")
    def mail() -> None: ...

    @app.task(name="t.free")
    def free() -> None: ...

    assert mail.rate_limit == "50/m"
    assert limit_of(app, "t.mail") == RateLimit("50/m")
    assert limit_of(app, "t.free") is None


def test_a_class_based_task_and_a_shared_limit(app: Celery) -> None:
    class Fetch(Task):
        name = "t.fetch"
        rate_limit = "10/s"

        def run(self) -> None: ...

    app.register_task(Fetch)

    @app.task(name="t.api", rate_limit=RateLimit("100/h", shared=True))
    def api() -> None: ...

    assert limit_of(app, "t.fetch") == RateLimit("10/s")
    shared = limit_of(app, "t.api")
    assert shared is not None and shared.shared and shared.per_second == pytest.approx(100 / 3600)


def test_the_default_rate_limit_and_disabling_them(make_app: Any) -> None:
    app = make_app(task_default_rate_limit="5/s")

    @app.task(name="t.a")
    def a() -> None: ...

    @app.task(name="t.b", rate_limit="1/m")
    def b() -> None: ...

    assert limit_of(app, "t.a") == RateLimit("5/s") and limit_of(app, "t.b") == RateLimit("1/m")
    off = make_app("off", task_default_rate_limit="5/s", worker_disable_rate_limits=True)

    @off.task(name="t.c", rate_limit="1/m")
    def c() -> None: ...

    assert limit_of(off, "t.c") is None


def test_a_rate_that_cannot_be_read_is_refused_naming_the_forms(app: Celery) -> None:
    with pytest.raises(JobDefinitionError, match="'N/s', 'N/m' or 'N/h'"):
        app.task(name="t.bad", rate_limit="10/day")(lambda: None)


def test_app_control_rate_limit_is_refused_with_the_reason(app: Celery) -> None:
    with pytest.raises(RefusedFeature, match="rate_limit"):
        app.control.rate_limit("t.mail", "10/m")


def test_a_worker_starts_a_limited_task_at_its_rate_and_the_others_at_once(app: Celery) -> None:
    started: dict[str, list[tuple[float, int]]] = {"limited": [], "free": []}

    @app.task(name="t.limited", rate_limit="10/s", bind=True)
    def limited(self: Task) -> None:
        started["limited"].append((time.time(), self.request.retries))

    @app.task(name="t.freely", bind=True)
    def freely(self: Task) -> None:
        started["free"].append((time.time(), self.request.retries))

    for _ in range(8):
        limited.delay()
    for _ in range(4):
        freely.delay()
    worker = Worker(app.jobbridge_app(), WorkerOptions(queues=("celery",), concurrency=4, stop_when_empty=True,
                                                       sleep=0.01))
    stats = worker.run()
    assert stats.succeeded == 12 and stats.released == 0 and stats.failed == 0
    times = sorted(t for t, _ in started["limited"])
    assert len(times) == 8 and {r for _, r in started["limited"] + started["free"]} == {0}
    assert min(b - a for a, b in itertools.pairwise(times)) > 0.08, "at most 10 a second"
    assert max(t for t, _ in started["free"]) < times[2], "the other tasks did not wait behind them"
