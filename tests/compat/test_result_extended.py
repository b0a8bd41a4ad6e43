"""``result_extended = True``: a result keeps the task's name, args, kwargs, worker, queue and retries.

As Celery's backend stores them (``BaseBackend._get_result_meta``: with ``result_extended``,
``name``, ``args``, ``kwargs``, ``worker`` (the request's hostname), ``retries`` and ``queue``
(the delivery's routing key) go into the meta of every state it stores), and as
``AsyncResult.name / args / kwargs / worker / queue / retries / date_done`` read them back.
Observed on Celery 5.5.3 for ``add.apply((2,), {'y': 3})`` with ``task_store_eager_result``:
``p.add [2] {'y': 3} <hostname> None 0 <date_done>``; without ``result_extended``, ``args`` is None.
"""

from __future__ import annotations

import socket
from datetime import datetime
from pathlib import Path

import pytest
from jobbridge.compat import Celery

from .projects import Worker, load, use

CELERYS_META_KEYS = {"args", "children", "date_done", "kwargs", "name", "queue", "result", "retries", "status",
                     "task_id", "traceback", "worker"}


def eager_app(tmp_path: Path, extended: bool) -> Celery:
    return Celery("p", broker="memory://", backend=f"db+sqlite:///{tmp_path / 'results.sqlite3'}",
                  result_extended=extended, task_store_eager_result=True)


def test_an_eager_call_keeps_what_celery_keeps(tmp_path: Path) -> None:
    app = eager_app(tmp_path, extended=True)

    @app.task(bind=True, name="p.add")  # Celery's name for it, defined in __main__ there
    def add(self: object, x: int, y: int = 0) -> int:
        return x + y

    try:
        done = add.apply((2,), {"y": 3})
        found = app.AsyncResult(done.id)
        assert (found.name, found.args, found.kwargs, found.worker, found.queue, found.retries) == (
            "p.add", [2], {"y": 3}, socket.gethostname(), None, 0)
        assert isinstance(found.date_done, datetime) and found.get() == 5
        assert set(app.backend.get_task_meta(done.id)) >= CELERYS_META_KEYS
        found.forget()
        assert app.AsyncResult(done.id).args is None and app.AsyncResult(done.id).state == "PENDING"
    finally:
        app.close()


def test_without_it_the_call_is_not_kept(tmp_path: Path) -> None:
    app = eager_app(tmp_path, extended=False)

    @app.task(name="p.add")
    def add(x: int, y: int = 0) -> int:
        return x + y

    try:
        found = app.AsyncResult(add.apply((2,), {"y": 3}).id)
        assert found.get() == 5 and found.name == "p.add"
        assert (found.args, found.kwargs, found.worker, found.queue, found.retries) == (None,) * 5
    finally:
        app.close()


@pytest.mark.slow
def test_a_worker_keeps_the_call_of_each_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker, backend = f"sqla+sqlite:///{tmp_path / 'jobs.sqlite3'}", f"db+sqlite:///{tmp_path / 'jobs.sqlite3'}"
    monkeypatch.setenv("CELERY_BROKER_URL", broker)
    monkeypatch.setenv("CELERY_RESULT_BACKEND", backend)
    module = load("extendedproj")
    app = use(module.app)
    worker = Worker(tmp_path, "extendedproj", broker, "-n", "extended@%h", env={"CELERY_RESULT_BACKEND": backend})
    try:
        sent = module.flaky.apply_async((2,), {"y": 3})
        assert sent.get(timeout=30) == 5, worker.output()
        found = app.AsyncResult(sent.id)
        assert (found.name, found.args, found.kwargs, found.queue, found.retries) == (
            "extendedproj.flaky", [2], {"y": 3}, "extended", 1)
        assert str(found.worker).startswith("extended@") and isinstance(found.date_done, datetime)
        assert worker.stop() == 0, worker.output()
    finally:
        worker.kill()
        app.close()
