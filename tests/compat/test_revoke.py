"""Revoking tasks: app.control.revoke and AsyncResult.revoke, kept in the store, seen by every worker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from jobbridge.compat import Celery, RefusedFeature, Task, states
from jobbridge.compat.exceptions import TaskRevokedError

from jobbridge.testing import FixedClock

from .conftest import Recorder


@pytest.fixture(params=["memory", "sqlite"])
def app(request: pytest.FixtureRequest, make_app: Callable[..., Celery], tmp_path: Path) -> Celery:
    if request.param == "memory":
        return make_app(result_backend="memory://")
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    return make_app(broker=f"sqla+{url}", result_backend=f"db+{url}")


def test_a_revoked_task_never_runs_and_ends_revoked(app: Celery, recorder: Recorder) -> None:
    ran: list[int] = []

    @app.task
    def work(n: int) -> None:
        ran.append(n)

    first, second, _third = work.delay(1), work.delay(2), work.delay(3)
    first.revoke()
    app.control.revoke([second.id])
    assert app.jobbridge_app().run_pending().processed == 3
    assert ran == [3]
    assert first.state == second.state == states.REVOKED and first.ready()
    with pytest.raises(TaskRevokedError):
        first.get(timeout=1)
    revoked = recorder.of("task_revoked")
    assert sorted(r["request"].id for r in revoked) == sorted([first.id, second.id])
    assert all(r["terminated"] is False and r["expired"] is False for r in revoked)
    assert revoked[0]["request"].task == work.name and revoked[0]["request"].args in ([1], [2])


def test_a_revoke_is_kept_in_the_store_not_in_a_worker(make_app: Callable[..., Celery], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    web = make_app(broker=f"sqla+{url}", result_backend=f"db+{url}")
    ran: list[str] = []

    @web.task(name="work")
    def work() -> None:
        ran.append("web")

    result = work.delay()
    web.control.revoke(result.id)
    worker = make_app("worker", broker=f"sqla+{url}")  # another process, started later, no result_backend

    @worker.task(name="work")
    def work_there() -> None:
        ran.append("worker")

    assert worker.jobbridge_app().run_pending().processed == 1
    assert ran == [] and result.state == states.REVOKED


def test_revoking_a_retry_sent_as_a_new_message(app: Celery, clock: FixedClock, recorder: Recorder) -> None:
    ran: list[int] = []

    @app.task(bind=True)
    def again(self: Task, n: int) -> None:
        ran.append(n)
        raise self.retry(args=(n + 1,), countdown=5)  # new arguments: a new message, under the same task id

    result = again.delay(0)
    bridge = app.jobbridge_app()
    bridge.run_pending()
    assert ran == [0] and result.state == states.RETRY
    result.revoke()
    clock.advance(5)
    assert bridge.run_pending().processed == 1
    assert ran == [0] and result.state == states.REVOKED
    assert [r["request"].id for r in recorder.of("task_revoked")] == [result.id]


def test_terminate_and_the_rest_of_remote_control(app: Celery) -> None:
    @app.task
    def work() -> None: ...

    result = work.delay()
    app.control.terminate(result.id)
    app.jobbridge_app().run_pending()
    assert result.state == states.REVOKED
    with pytest.raises(RefusedFeature, match="no remote control"):
        app.control.broadcast("shutdown")
    with pytest.raises(RefusedFeature, match=r"inspect\(\)\.active\(\) is not available.*jobbridge status"):
        app.control.inspect().active()
    with pytest.raises(RefusedFeature, match="every worker sees it"):
        app.control.revoke(result.id, destination=["worker1@host"])
