"""What Celery's own integration suite (t/integration, tests/compat/test_celery_integration_suite.py) found.

Each expectation is what Celery 5.5 does, read from its source and seen on a real
Celery worker (memory broker, solo pool) in its own process: ``apply_async(app_id=...)``
reaches the task as ``self.request.properties["app_id"]``; the worker logs a task's
receipt on ``celery.worker.strategy`` and its end on ``celery.app.trace`` with the
``celery.app.trace.LOG_*`` formats and the values in ``record.data``; an exception
that cannot be rebuilt from its arguments is read back as
``celery.utils.serialization.UnpickleableExceptionWrapper``, while it retries too.
Stamping is refused at the call, naming what to write instead. Tasks run in the
test's thread (``run_pending``) on the memory driver.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from jobbridge.compat import Celery, RefusedFeature, Task, chain, group, states
from jobbridge.compat.canvas import StampingVisitor
from jobbridge.compat.results.serialization import UnpickleableExceptionWrapper
from jobbridge.compat.running import trace_log

from .test_celery_modules import run as run_in_subprocess


class Unpickleable(Exception):
    """Celery's integration tasks' UnpickleableException: its __init__ wants two arguments, it passes one on."""

    def __init__(self, foo: str, bar: str | None = None) -> None:
        if bar is None:
            raise TypeError("bar must be provided")
        super().__init__(foo)
        self.bar = bar


@pytest.fixture
def app(make_app: Callable[..., Celery]) -> Celery:
    return make_app(result_backend="memory://")


def work(app: Celery) -> None:
    app.jobbridge_app().run_pending()


def test_message_properties_set_at_the_call_reach_the_task(app: Celery) -> None:
    @app.task(bind=True)
    def properties(self: Task) -> Any:
        return self.request.properties

    result = properties.apply_async(app_id="1234", user_id="guest")
    work(app)
    got = result.get()
    assert got["app_id"] == "1234" and got["user_id"] == "guest"
    assert got["correlation_id"] == result.id
    plain = properties.delay()
    work(app)
    assert "app_id" not in plain.get()


def test_message_properties_are_not_the_callers_headers(app: Celery) -> None:
    @app.task(bind=True)
    def headers(self: Task) -> Any:
        return self.request.headers

    result = headers.apply_async(app_id="1234", headers={"x-mine": "yes"})
    work(app)
    assert result.get() == {"x-mine": "yes"}


def test_priority_is_refused_at_the_call_naming_the_replacement(app: Celery) -> None:
    @app.task
    def urgent() -> None: ...

    with pytest.raises(RefusedFeature, match=r"priority.*queue the worker lists first"):
        urgent.apply_async(priority=7)


def _records(caplog: pytest.LogCaptureFixture, task_id: str) -> list[tuple[str, int, str, Any, Any]]:
    return [(r.name, r.levelno, r.msg, r.data["args"], r.data["kwargs"]) for r in caplog.records  # type: ignore[attr-defined]
            if r.name in {"celery.worker.strategy", "celery.app.trace"} and r.data["id"] == task_id]  # type: ignore[attr-defined]


def test_the_worker_logs_receipt_and_success_as_celerys_tracer(app: Celery, caplog: pytest.LogCaptureFixture) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    caplog.set_level(logging.INFO)
    result = add.s(2, 2).set(argsrepr="CUSTOM ARGS", kwargsrepr="CUSTOM KWARGS").delay()
    work(app)
    assert result.get() == 4
    assert _records(caplog, result.id) == [
        ("celery.worker.strategy", logging.INFO, trace_log.LOG_RECEIVED, "CUSTOM ARGS", "CUSTOM KWARGS"),
        ("celery.app.trace", logging.INFO, trace_log.LOG_SUCCESS, "CUSTOM ARGS", "CUSTOM KWARGS"),
    ]
    success = [r for r in caplog.records if r.name == "celery.app.trace"][-1]
    assert success.getMessage().startswith(f"Task {add.name}[{result.id}] succeeded in ")
    assert success.getMessage().endswith("s: 4")


def test_the_worker_logs_a_failure_at_error_and_an_expected_one_at_info(
        app: Celery, caplog: pytest.LogCaptureFixture) -> None:
    @app.task
    def fail(x: int) -> None:
        raise ValueError(f"fail {x}")

    @app.task(throws=(KeyError,))
    def lookup() -> None:
        raise KeyError("missing")

    caplog.set_level(logging.INFO)
    failed, expected = fail.delay(1), lookup.delay()
    work(app)
    assert failed.state == expected.state == states.FAILURE
    assert _records(caplog, failed.id)[-1] == ("celery.app.trace", logging.ERROR, trace_log.LOG_FAILURE,
                                               "(1,)", "{}")
    record = [r for r in caplog.records if r.name == "celery.app.trace" and r.data["id"] == failed.id][-1]  # type: ignore[attr-defined]
    assert record.getMessage() == f"Task {fail.name}[{failed.id}] raised unexpected: ValueError('fail 1')"
    assert record.exc_info is not None
    quiet = [r for r in caplog.records if r.name == "celery.app.trace" and r.data["id"] == expected.id][-1]  # type: ignore[attr-defined]
    assert quiet.levelno == logging.INFO and "raised expected" in quiet.getMessage() and quiet.exc_info is None


def test_a_changed_log_format_in_celery_app_trace_is_used() -> None:
    out = run_in_subprocess("""
        import logging
        from jobbridge.compat import install_as_celery
        install_as_celery()
        import celery.app.trace
        from celery import Celery
        lines = []
        class Keep(logging.Handler):
            def emit(self, record):
                lines.append(record.getMessage())
        logging.getLogger("celery.app.trace").addHandler(Keep())
        logging.getLogger("celery.app.trace").setLevel(logging.INFO)
        celery.app.trace.LOG_SUCCESS = "done %(name)s"
        app = Celery("proj", broker="memory://", result_backend="memory://")
        @app.task
        def add(x, y):
            return x + y
        add.delay(1, 2)
        app.jobbridge_app().run_pending()
        print(lines)
    """)
    assert out == "['done proj.add']" or out == "['done __main__.add']", out


def test_an_exception_that_cannot_be_rebuilt_is_read_back_wrapped(app: Celery) -> None:
    @app.task
    def fail_unpickleable(foo: str, bar: str) -> None:
        raise Unpickleable(foo, bar)

    result = fail_unpickleable.delay("foo", "bar")
    work(app)
    with pytest.raises(UnpickleableExceptionWrapper) as caught:
        result.get()
    assert caught.value.exc_cls_name == "Unpickleable" and caught.value.exc_args == ("foo",)
    assert caught.value.exc_module == __name__ and result.status == states.FAILURE


def test_a_retry_with_such_an_exception_holds_the_wrapper(app: Celery) -> None:
    @app.task(bind=True)
    def retry_unpickleable(self: Task, foo: str, bar: str) -> None:
        raise self.retry(exc=Unpickleable(foo, bar), countdown=10, max_retries=1)

    job = retry_unpickleable.delay("foo", "bar")
    work(app)
    assert job.status == states.RETRY
    assert isinstance(job.result, UnpickleableExceptionWrapper)
    assert (job.result.exc_cls_name, job.result.exc_args) == ("Unpickleable", ("foo",))


def test_the_wrapper_is_celery_utils_serialization_s_under_install_as_celery() -> None:
    out = run_in_subprocess("""
        from jobbridge.compat import install_as_celery
        install_as_celery()
        from celery.utils.serialization import UnpickleableExceptionWrapper, get_pickleable_exception
        from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS, LOG_FAILURE, LOG_RETRY
        from celery.canvas import StampingVisitor
        from jobbridge.compat.results import serialization
        assert UnpickleableExceptionWrapper is serialization.UnpickleableExceptionWrapper
        class Odd(Exception):
            def __init__(self, a, b):
                super().__init__(a)
        wrapped = get_pickleable_exception(Odd(1, 2))
        assert isinstance(wrapped, UnpickleableExceptionWrapper) and wrapped.exc_args == (1,)
        assert get_pickleable_exception(ValueError("x")).args == ("x",)
        print(LOG_SUCCESS)
    """)
    assert out == "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s"


def test_stamping_is_refused_at_the_call_naming_headers_instead(app: Celery) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    class Visitor(StampingVisitor):  # a module defining a visitor still imports
        def on_signature(self, actual_sig: Any, **headers: Any) -> dict[str, Any]:
            return {"on_signature": 42}

    for stamped in (add.s(1, 2), chain(add.s(1, 2), add.s(3)), group(add.s(1, 2), add.s(3, 4))):
        with pytest.raises(RefusedFeature, match=r"stamp\(\) is refused.*headers=\{\.\.\.\}"):
            stamped.stamp(visitor=Visitor())
        with pytest.raises(RefusedFeature, match=r"self\.request\.headers"):
            stamped.stamp(monitoring_id="abc")
    with pytest.raises(RefusedFeature, match="stamping is not provided"):
        add.apply_async((1, 2), stamped_headers=["monitoring_id"], monitoring_id="abc")
    with pytest.raises(RefusedFeature, match="stamping is not provided"):
        app.control.revoke_by_stamped_headers({"monitoring_id": "abc"})


@pytest.mark.parametrize("enable_logging", [True, False])
def test_a_logging_test_app_s_worker_sets_the_root_level_as_celery_s(enable_logging: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Celery's start_worker runs app.log.setup(loglevel), which a test app without enable_logging skips."""
    from jobbridge.compat.contrib.testing.app import TestApp
    from jobbridge.compat.contrib.testing.worker import start_worker

    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.WARNING)
    app = TestApp(enable_logging=enable_logging, config={"result_backend": "memory://"})
    try:
        with start_worker(app, loglevel="info", perform_ping_check=False):
            assert root.level == (logging.INFO if enable_logging else logging.WARNING)
    finally:
        app.close()


def test_bytes_arguments_travel_as_kombus_json_tags_them(app: Celery) -> None:
    """kombu's json (Celery 5.5's default) sends bytes tagged "bytes" (UTF-8) or "base64" (any other)."""
    from jobbridge.compat import codec

    @app.task
    def echo(value: bytes, raw: bytes) -> list[Any]:
        return [type(value).__name__, value.decode(), list(raw)]

    assert codec.encode(b"caf\xc3\xa9", "x", "t") == {"__type__": "bytes", "__value__": "café"}
    assert codec.encode(b"\xff\x00", "x", "t") == {"__type__": "base64", "__value__": "/wA="}
    result = echo.delay(b"hello", b"\xff\x00")
    work(app)
    assert result.get() == ["bytes", "hello", [255, 0]]


def _eventually(probe: Callable[[], Any], wanted: Any) -> Any:
    """``probe()`` once it gives ``wanted`` (the first heartbeat is written by the monitor thread), else its last."""
    import time

    found = probe()
    for _ in range(100):
        if found == wanted:
            break
        time.sleep(0.05)
        found = probe()
    return found


def test_ping_is_answered_from_the_live_workers_heartbeats(tmp_path: Any) -> None:
    from jobbridge.compat.contrib.testing.app import TestApp
    from jobbridge.compat.contrib.testing.worker import start_worker

    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    app = TestApp(config={"broker_url": f"sqla+{url}", "result_backend": f"db+{url}"})
    try:
        assert app.control.ping() == [] and app.control.inspect().ping() is None
        with start_worker(app, hostname="w1@test", perform_ping_check=False):
            pong = {"w1@test": {"ok": "pong"}}
            assert _eventually(app.control.ping, [pong]) == [pong]
            assert app.control.inspect().ping() == pong
            assert app.control.inspect(destination=["w2@test"]).ping() is None
            with pytest.raises(RefusedFeature, match="jobbridge status"):
                app.control.inspect().stats()
        assert app.control.ping() == []
    finally:
        app.close()
