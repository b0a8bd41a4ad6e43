"""Celery's documented ways to test against a live worker, unchanged."""

import time

import pytest
from celery.contrib.testing.worker import start_worker
from celery.exceptions import TimeoutError
from shop.tasks import crunch, refuse, total


def test_a_shared_task_runs_on_the_worker(celery_app, celery_worker):
    result = total.delay([2, 3, 5])
    assert result.get(timeout=10) == 10
    assert result.state == "SUCCESS"


def test_a_task_defined_in_the_test(celery_app, celery_worker):
    @celery_app.task
    def mul(x, y):
        return x * y

    celery_worker.reload()
    assert mul.delay(4, 4).get(timeout=10) == 16


def test_the_task_error_comes_back(celery_app, celery_worker):
    with pytest.raises(ValueError, match="order 7 is closed"):
        refuse.delay(7).get(timeout=10)


def test_an_abortable_task_stops_when_asked(celery_app, celery_worker):
    result = crunch.delay(400)
    deadline = time.monotonic() + 10
    while result.state != "PROGRESS" and time.monotonic() < deadline:
        time.sleep(0.02)
    result.abort()
    assert result.is_aborted()
    assert result.get(timeout=10).startswith("aborted after")


@pytest.mark.celery(task_default_queue="orders")
def test_the_celery_marker_configures_the_app(celery_app, celery_worker):
    assert celery_app.conf.task_default_queue == "orders"
    assert total.delay([1, 1]).get(timeout=10) == 2


def test_start_worker_as_a_context_manager(celery_app):
    @celery_app.task
    def hello(name):
        return f"hello {name}"

    with start_worker(celery_app, perform_ping_check=False):
        assert hello.delay("ada").get(timeout=10) == "hello ada"
    late = hello.delay("bob")
    with pytest.raises(TimeoutError):
        late.get(timeout=0.5)  # the worker stopped with the block


def test_the_session_worker(celery_session_app, celery_session_worker):
    assert total.delay([4]).get(timeout=10) == 4


def test_these_tests_run_on_the_facade(celery_app, celery_worker):
    import celery

    from jobbridge.worker import Worker

    assert getattr(celery, "__jobbridge__", False)
    assert isinstance(celery_worker.worker, Worker)


def test_a_task_aborted_before_it_started_never_runs(celery_app):
    from celery.exceptions import TaskRevokedError

    result = crunch.delay(400)
    result.abort()
    with start_worker(celery_app):
        with pytest.raises(TaskRevokedError):
            result.get(timeout=10)
        assert result.state == "REVOKED"  # it never wrote PROGRESS
