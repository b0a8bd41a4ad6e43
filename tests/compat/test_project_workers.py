"""Each sample project under a real ``jobbridge worker -A ...`` process, on SQLite and on Redis.

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


def test_django_project(tmp_path: Path, store: dict[str, str]) -> None:
    app = use(load("djangoproj").celery_app)
    blog, accounts = load("djangoproj.blog.tasks"), load("djangoproj.accounts.tasks")
    worker = start(tmp_path, "djangoproj", store)
    try:
        blog.fetch_feed.delay("https://example.com/feed")
        accounts.send_welcome_email.delay(7)
        blog.publish_post.delay(1)
        blog.rebuild_index.delay()
        wanted = [blog.fetch_feed.name, accounts.send_welcome_email.name, blog.publish_post.name,
                  blog.rebuild_index.name]
        worker.wait_for(lambda ev: all(finished(ev, name) for name in wanted), "every task to finish")
        assert worker.stop() == 0, worker.output()
    finally:
        worker.kill()
        app.close()
    events = worker.events()
    lifecycle_is_celerys(events)
    assert [e[2] for e in of(events, "fetch_feed")] == [0, 1, 2]
    assert [e[2] for e in of(events, "task_retry")] == [0, 1]
    assert of(events, "send_welcome_email") == [["send_welcome_email", 7, "mail"]]
    assert of(events, "publish_post") == [["publish_post", 1]]
    assert of(events, "task_failure") == [["task_failure", blog.rebuild_index.name, "ValueError"]]
    fetch = [e for e in events if len(e) > 1 and e[1] == blog.fetch_feed.name]
    assert names(fetch) == ["task_prerun", "task_retry", "task_postrun"] * 2 + [
        "task_prerun", "task_success", "task_postrun"]
    failed = app.jobbridge_app().driver().failed_jobs(10)
    assert [f.name for f in failed] == [blog.rebuild_index.name]
    app.close()


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
