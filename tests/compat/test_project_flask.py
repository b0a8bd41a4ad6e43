"""The Flask-style project: upper-case settings in app.config, a ContextTask base, a mail task with countdown."""

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
    package = load("flaskproj")
    app: Celery = package.celery
    app.set_current()
    app.jobbridge_options(clock=clock)
    load("compat_events").memory.clear()
    yield package
    app.close()


def test_old_upper_case_settings_are_read_and_flasks_own_left_alone(project: Any) -> None:
    conf = project.celery.conf
    assert conf.task_default_queue == "default" and conf.worker_concurrency == 2
    assert conf.task_routes == {"flaskproj.mail.send_mail": {"queue": "mail"}}
    assert "SECRET_KEY" not in conf and conf.task_acks_late is True
    assert project.celery.jobbridge_app().settings.concurrency == 2


def test_signup_mails_after_the_countdown_retrying_in_the_app_context(project: Any, clock: FixedClock) -> None:
    views = load("flaskproj.views")
    assert views.signup("ann@example.com") == {"status": "ok"}
    bridge = project.celery.jobbridge_app()
    assert pending(bridge.driver(), "mail") == 1
    assert bridge.run_pending(["default", "mail"]).processed == 0
    clock.advance(1)
    assert bridge.run_pending(["default", "mail"]).released == 1
    clock.advance(1)
    assert bridge.run_pending(["default", "mail"]).succeeded == 1
    mails = [m[:6] for m in of(memory_events(), "send_mail")]
    assert mails == [["send_mail", "ann@example.com", "Welcome!", 0, True, "localhost"],
                     ["send_mail", "ann@example.com", "Welcome!", 1, True, "localhost"]]


def test_the_task_runs_directly_in_the_app_context_too(project: Any) -> None:
    mail = load("flaskproj.mail")
    load("compat_events").memory.extend([["send_mail"], ["send_mail"]])  # delivery succeeds now
    mail.send_mail("bob@example.com", "Hi", "...")
    assert of(memory_events(), "send_mail")[-1][4] is True


def test_the_report_view_shows_progress_then_the_result(project: Any) -> None:
    views = load("flaskproj.views")
    seen: list[dict[str, Any]] = []
    from jobbridge.compat import signals

    def poll(sender: Any = None, **kwargs: Any) -> None:
        seen.append(views.report_status(body["task_id"]))

    body, status = views.start_report(3)
    assert status == 202 and views.report_status(body["task_id"])["state"] == "PENDING"
    signals.task_postrun.connect(poll)
    try:
        with patch("time.sleep"):
            assert project.celery.jobbridge_app().run_pending(["default"]).succeeded == 1
    finally:
        signals.task_postrun.disconnect(poll)
    assert seen == [{"state": "PROGRESS", "done": 3, "total": 3}]
    assert views.report_status(body["task_id"]) == {
        "state": "SUCCESS", "result": {"rows": 3, "url": f"/reports/{body['task_id']}.csv"}}
