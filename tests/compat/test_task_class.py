"""A custom Task base class: __call__, before_start, on_success, on_failure, after_return; task options."""

from __future__ import annotations

from typing import Any

import pytest
from jobbridge.compat import Celery, RefusedFeature, Task

from jobbridge.testing.contract import pending


def test_handlers_of_a_custom_base_run_in_celerys_order(app: Celery) -> None:
    calls: list[str] = []

    class Audited(Task):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            calls.append("__call__")
            return super().__call__(*args, **kwargs)

        def before_start(self, task_id: Any, args: Any, kwargs: Any) -> None:
            calls.append("before_start")

        def on_success(self, retval: Any, task_id: Any, args: Any, kwargs: Any) -> None:
            calls.append(f"on_success:{retval}")

        def on_failure(self, exc: Any, task_id: Any, args: Any, kwargs: Any, einfo: Any) -> None:
            calls.append(f"on_failure:{type(exc).__name__}:{einfo.type.__name__}")

        def after_return(self, status: str, retval: Any, task_id: Any, args: Any, kwargs: Any,
                         einfo: Any) -> None:
            calls.append(f"after_return:{status}")

    @app.task(base=Audited, bind=True)
    def divide(self: Task, x: int, y: int) -> float:
        calls.append(f"run:{self.request.id is not None}")
        return x / y

    divide.delay(4, 2)
    divide.delay(1, 0)
    app.jobbridge_app().run_pending(["celery"])
    assert calls == ["before_start", "__call__", "run:True", "on_success:2.0", "after_return:SUCCESS",
                     "before_start", "__call__", "run:True", "on_failure:ZeroDivisionError:ZeroDivisionError",
                     "after_return:FAILURE"]


def test_unknown_task_options_are_kept_as_attributes(app: Celery) -> None:
    @app.task(acks_late=True, ignore_result=True, custom_flag="yes", queue="q", time_limit=60)
    def job() -> None: ...

    assert job.custom_flag == "yes" and job.acks_late is True and job.queue == "q" and job.time_limit == 60


def test_options_that_cannot_be_honoured_are_refused_on_the_decorator(app: Celery) -> None:
    with pytest.raises(RefusedFeature, match="by queue"):
        app.task(priority=5, name="prio")(lambda: None)
    with pytest.raises(RefusedFeature, match="pickle"):
        app.task(serializer="pickle", name="p")(lambda: None)


def test_a_class_based_task_is_registered(app: Celery) -> None:
    done: list[int] = []

    class Cleanup(app.Task):  # type: ignore[name-defined,misc]
        name = "maintenance.cleanup"

        def run(self, days: int) -> None:
            done.append(days)

    task = app.register_task(Cleanup())
    task.delay(30)
    app.jobbridge_app().run_pending(["celery"])
    assert done == [30] and app.tasks["maintenance.cleanup"] is task


def test_shared_tasks_follow_the_current_app(make_app: Any) -> None:
    from jobbridge.compat import shared_task

    @shared_task(name="shared.ping")
    def ping() -> str:
        return "pong"

    first = make_app("first")
    second = make_app("second")
    assert "shared.ping" in first.tasks and "shared.ping" in second.tasks
    ping.delay()
    assert pending(second.jobbridge_app().driver(), "celery") == 1
    assert pending(first.jobbridge_app().driver(), "celery") == 0
    first.set_current()
    assert ping.app is first and ping() == "pong"


def test_periodic_tasks_set_up_on_configure_become_schedule_entries_when_the_app_loads(make_app: Any) -> None:
    app = make_app("beat")

    @app.on_after_configure.connect
    def setup_periodic_tasks(sender: Any, **kwargs: Any) -> None:
        sender.add_periodic_task(10.0, app.task(lambda: None, name="tick").s())

    assert [e.name for e in app.jobbridge_app().schedules.entries()] == ["tick()"]
