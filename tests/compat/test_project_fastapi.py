"""The FastAPI-style project: settings from the environment, tests that call task.run and patch .delay."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from jobbridge.compat import Celery

from jobbridge.testing import FixedClock
from jobbridge.testing.contract import pending

from .projects import load, memory_events, of


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch, clock: FixedClock) -> Any:
    monkeypatch.setenv("CELERY_BROKER_URL", "memory://")
    monkeypatch.setenv("CELERY_RESULT_BACKEND", "memory://")
    worker = load("fastapiproj.worker")
    app: Celery = worker.celery
    app.set_current()
    app.jobbridge_options(clock=clock)
    load("compat_events").memory.clear()
    yield worker
    app.close()


def test_task_run_executes_the_function(project: Any) -> None:
    assert project.create_task.run(1) is True
    assert of(memory_events(), "create_task") == [["create_task", 1]]


def test_the_route_is_tested_by_patching_delay(project: Any) -> None:
    main = load("fastapiproj.main")
    with patch("fastapiproj.worker.create_task.delay") as delay:
        delay.return_value.id = "fake-id"
        assert main.run_task({"type": 2}) == {"task_id": "fake-id"}
    delay.assert_called_once_with(2)
    assert pending(project.celery.jobbridge_app().driver(), "celery") == 0


def test_the_route_queues_the_task_for_a_worker(project: Any) -> None:
    main = load("fastapiproj.main")
    task_id = main.run_task({"type": 1})["task_id"]
    bridge = project.celery.jobbridge_app()
    assert bridge.run_pending().succeeded == 1
    assert of(memory_events(), "create_task") == [["create_task", 1]]
    assert main.get_status(task_id) == {"task_id": task_id, "task_status": "SUCCESS", "task_result": True}


def test_the_broker_comes_from_the_environment(project: Any) -> None:
    assert project.celery.conf.broker_url == "memory://"
