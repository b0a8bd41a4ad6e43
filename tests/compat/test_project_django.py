"""The Django-style project: CELERY_ settings namespace, autodiscover_tasks, @shared_task with autoretry."""

from __future__ import annotations

from typing import Any

import pytest
from jobbridge.compat import Celery

from jobbridge.testing import FixedClock

from .projects import load, memory_events, of


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch, clock: FixedClock) -> Any:
    monkeypatch.setenv("CELERY_BROKER_URL", "memory://")
    monkeypatch.setenv("CELERY_RESULT_BACKEND", "memory://")
    package = load("djangoproj")
    app: Celery = package.celery_app
    app.set_current()
    app.jobbridge_options(clock=clock)
    load("compat_events").memory.clear()
    yield package
    app.close()


def test_settings_come_from_the_celery_namespace(project: Any) -> None:
    conf = project.celery_app.conf
    assert conf.timezone == "Europe/Paris" and conf.task_time_limit == 1800
    assert conf.task_routes == {"djangoproj.accounts.tasks.*": {"queue": "mail"}}
    settings = project.celery_app.jobbridge_app().settings
    assert settings.queues == ("celery", "mail") and settings.connection().driver == "memory"


def test_autodiscover_registers_every_apps_tasks(project: Any) -> None:
    names = set(project.celery_app.tasks)
    assert {"djangoproj.blog.tasks.fetch_feed", "djangoproj.blog.tasks.publish_post",
            "djangoproj.accounts.tasks.send_welcome_email", "djangoproj.celery.debug_task"} <= names
    assert set(project.celery_app.jobbridge_app().registry.names()) >= names


def test_autoretry_with_backoff_then_success(project: Any, clock: FixedClock) -> None:
    tasks = load("djangoproj.blog.tasks")
    tasks.fetch_feed.delay("https://example.com/feed")
    bridge = project.celery_app.jobbridge_app()
    assert bridge.run_pending().released == 1  # retries=0: countdown 1 x 2^0
    clock.advance(1)
    assert bridge.run_pending().released == 1  # retries=1: countdown 2
    clock.advance(1.5)
    assert bridge.run_pending().processed == 0
    clock.advance(0.5)
    assert bridge.run_pending().succeeded == 1
    assert [e[2] for e in of(memory_events(), "fetch_feed")] == [0, 1, 2]
    assert [e[2] for e in of(memory_events(), "task_retry")] == [0, 1]


def test_routes_send_account_tasks_to_the_mail_queue(project: Any) -> None:
    accounts = load("djangoproj.accounts.tasks")
    accounts.send_welcome_email.delay(42)
    bridge = project.celery_app.jobbridge_app()
    assert bridge.driver().pending_count("mail") == 1
    bridge.run_pending()
    assert of(memory_events(), "send_welcome_email") == [["send_welcome_email", 42, "mail"]]


def test_a_failing_task_is_failed_once_with_signals(project: Any) -> None:
    load("djangoproj.blog.tasks").rebuild_index.delay()
    bridge = project.celery_app.jobbridge_app()
    assert bridge.run_pending().failed == 1
    assert of(memory_events(), "task_failure") == [["task_failure", "djangoproj.blog.tasks.rebuild_index",
                                                    "ValueError"]]
    assert "the index is corrupt" in bridge.driver().failed_jobs(5)[0].error
