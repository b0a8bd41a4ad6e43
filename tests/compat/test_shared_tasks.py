"""``@shared_task`` reaches each app when the app is finalized, as in Celery.

Celery's ``shared_task`` registers a callback (``connect_on_app_finalize``) that every app runs
when it is finalized (``_announce_app_finalized``), and adds the task at once only to apps
already finalized. So an app made early and never used for work never reads its configuration
because a module defined a shared task, and a finalized app gets each new one as it is defined.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jobbridge.compat import Celery, shared_task

#: the settings read from each `Source` (kept outside it: every public name of a source is a setting)
READS: dict[int, list[str]] = {}


class Source:
    """A configuration object that records each setting read from it."""

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):
            READS.setdefault(id(self), []).append(name)
        return object.__getattribute__(self, name)

    broker_url = "memory://"
    task_time_limit = 30


@pytest.fixture
def apps() -> Iterator[list[Celery]]:
    made: list[Celery] = []
    yield made
    for app in made:
        app.close()


def test_an_app_not_finalized_reads_no_setting_when_a_shared_task_is_defined(apps: list[Celery]) -> None:
    source = Source()
    stray = Celery("stray", set_as_current=False)
    stray.config_from_object(source)
    apps.append(stray)

    @shared_task
    def defined_after_the_stray_app() -> str:
        return "pong"

    assert READS.get(id(source)) is None and not stray.finalized
    name = f"{__name__}.defined_after_the_stray_app"
    assert name in stray.tasks and stray.finalized  # ``app.tasks`` finalizes it: the task is there then
    assert stray.tasks[name]() == "pong"


def test_a_finalized_app_gets_each_shared_task_as_it_is_defined(apps: list[Celery]) -> None:
    app = Celery("used", broker="memory://", set_as_current=False)
    apps.append(app)
    app.finalize()

    @shared_task(name="shared.defined_later")
    def defined_later() -> int:
        return 1

    assert "shared.defined_later" in app._tasks  # not waiting for a next finalize, which never comes


def test_a_shared_task_defined_before_the_app_is_one_of_its_tasks(apps: list[Celery]) -> None:
    @shared_task(name="shared.defined_before")
    def defined_before(x: int) -> int:
        return x * 2

    app = Celery("later", broker="memory://", task_always_eager=True)
    apps.append(app)
    assert "shared.defined_before" in app.tasks
    assert defined_before.delay(21).get() == 42  # through the current app, as Celery's proxy
