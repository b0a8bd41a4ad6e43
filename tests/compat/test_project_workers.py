"""Each sample project under a real ``jobbridge worker -A ...`` process, on SQLite and on Redis.

(The Django project, a real one, has tests of its own: test_project_django.py.)

The test process dispatches as the web process would; the worker's tasks and its
signal receivers write events to a file, which the test reads: outcomes, retries,
and the order of Celery's signals from worker_init to worker_shutdown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .projects import lifecycle_is_celerys, load, names, of, start, use

pytestmark = pytest.mark.slow


def finished(events: list[list[Any]], task: str) -> bool:
    return any(e[0] == "task_postrun" and e[1] == task and e[2] in ("SUCCESS", "FAILURE") for e in events)


def test_flask_project(tmp_path: Path, store: dict[str, str]) -> None:
    app = use(load("flaskproj").celery)
    views = load("flaskproj.views")
    worker = start(tmp_path, "flaskproj:celery", store, "-Q", "default,mail", "-c", "2", "-n", "mailer@%h")
    try:
        views.signup("ann@example.com")
        worker.wait_for(lambda ev: finished(ev, "flaskproj.mail.send_mail"), "the mail to be sent")
        assert worker.stop() == 0, worker.output()
    finally:
        worker.kill()
        app.close()
    events = worker.events()
    lifecycle_is_celerys(events)
    mails = of(events, "send_mail")
    assert [m[3] for m in mails] == [0, 1] and all(m[4] is True for m in mails)
    assert all(m[6].startswith("mailer@") for m in mails)
    assert names([e for e in events if e[0].startswith("task_")]) == [
        "task_prerun", "task_retry", "task_postrun", "task_prerun", "task_success", "task_postrun"]


def test_fastapi_project(tmp_path: Path, store: dict[str, str]) -> None:
    worker_module = load("fastapiproj.worker")
    app = use(worker_module.celery)
    main = load("fastapiproj.main")
    worker = start(tmp_path, "fastapiproj.worker", store)
    try:
        main.run_task({"type": 1})
        main.run_task({"type": 2})
        worker.wait_for(lambda ev: len(of(ev, "create_task")) == 2, "both tasks to run")
        assert worker.stop() == 0, worker.output()
    finally:
        worker.kill()
        app.close()
    events = worker.events()
    lifecycle_is_celerys(events)
    assert sorted(e[1] for e in of(events, "create_task")) == [1, 2]
    assert len(of(events, "task_success")) == 2
