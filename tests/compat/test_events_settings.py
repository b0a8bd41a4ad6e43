"""Celery's event settings and ``-E`` are accepted; the worker says once, at its start, that no events are sent.

cookiecutter-django sets ``CELERY_WORKER_SEND_TASK_EVENTS`` and ``CELERY_TASK_SEND_SENT_EVENT`` (and
its compose file runs ``celery worker -E``) so that Flower sees tasks. jobbridge workers send no
Celery events: the project runs, and the worker's start has one warning line saying so and naming
what to use instead (``jobbridge status``, ``jobbridge workers``, docs/monitoring.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from jobbridge.compat import Celery

from .projects import Worker

NOTICE = "no Celery events are sent"


def test_the_event_settings_are_accepted_under_both_names() -> None:
    app = Celery("events", worker_send_task_events=True, task_send_sent_event=True, event_queue_ttl=5.0,
                 event_queue_expires=60.0, event_exchange="celeryev")
    app.conf.update({"CELERY_SEND_EVENTS": True, "CELERY_SEND_TASK_SENT_EVENT": True})
    app.conf.check()
    assert app.jobbridge_event_settings() == ["worker_send_task_events", "task_send_sent_event"]
    assert Celery("quiet").jobbridge_event_settings() == []


@pytest.mark.slow
def test_the_worker_says_it_once_for_the_settings_and_minus_e(tmp_path: Path) -> None:
    """The command's own process says it; a process that ``--processes N`` starts (``--supervised``) does not."""
    broker = f"sqla+sqlite:///{tmp_path / 'jobs.sqlite3'}"
    (tmp_path / "child").mkdir()
    worker = Worker(tmp_path, "eventsproj", broker, "-E", "--stop-when-empty")
    child = Worker(tmp_path / "child", "eventsproj", broker, "--supervised", str(os.getpid()), "--stop-when-empty")
    try:
        assert worker.proc.wait(60) == 0, worker.output()
        assert child.proc.wait(60) == 0, child.output()
    finally:
        worker.kill()
        child.kill()
    lines = [line for line in worker.output().splitlines() if NOTICE in line]
    assert len(lines) == 1, worker.output()
    assert "-E, worker_send_task_events, task_send_sent_event" in lines[0]
    assert "jobbridge status" in lines[0] and "docs/monitoring.md" in lines[0]
    assert NOTICE not in child.output()
