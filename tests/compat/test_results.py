"""Results through the facade: AsyncResult, get(), update_state, ignore_result, track_started, EagerResult.

Tasks run in the test's thread (``run_pending``) on the memory driver, and on
SQLite where the store matters, with a fixed clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from jobbridge.compat import (
    AsyncResult,
    Celery,
    EagerResult,
    ImproperlyConfigured,
    RefusedFeature,
    ResultsNotEnabled,
    Task,
    TimeoutError,
    states,
)
from jobbridge.compat.config.backends import NEVER, results_url, ttl
from jobbridge.compat.results.remote import RemoteTaskError, exception_of
from jobbridge.compat.results.serialization import UnpickleableExceptionWrapper

from jobbridge.results.base import ResultRecord
from jobbridge.testing import FixedClock


class PaymentDeclined(Exception):
    """An exception of the project's own, importable by its path."""


class NeedsTwo(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(code, text)


class NeedsKeyword(Exception):
    def __init__(self, *, code: int) -> None:
        super().__init__(f"code {code}")


@pytest.fixture(params=["memory", "sqlite"])
def app(request: pytest.FixtureRequest, make_app: Callable[..., Celery], tmp_path: Path) -> Celery:
    if request.param == "memory":
        return make_app(result_backend="memory://")
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    return make_app(broker=f"sqla+{url}", result_backend=f"db+{url}")


def run(app: Celery) -> None:
    app.jobbridge_app().run_pending()


def test_state_result_and_get_after_the_worker_ran(app: Celery) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    result = add.delay(2, 3)
    assert result.state == result.status == states.PENDING and not result.ready()
    assert result.result is None and result.info is None
    run(app)
    assert result.state == states.SUCCESS and result.ready() and result.successful() and not result.failed()
    assert result.result == result.info == 5 and result.get(timeout=1) == 5
    assert app.AsyncResult(result.id).get() == 5 == add.AsyncResult(result.id).result
    assert AsyncResult(result.id, app=app).name == add.name and result.date_done is not None
    assert app.backend.get_task_meta(result.id)["status"] == "SUCCESS"


def test_an_unknown_id_is_pending_as_in_celery(app: Celery) -> None:
    assert app.AsyncResult("never-sent").state == states.PENDING


def test_a_failure_is_raised_again_with_the_tasks_own_type(app: Celery) -> None:
    @app.task
    def pay(amount: int) -> None:
        raise PaymentDeclined(f"card declined for {amount}")

    result = pay.delay(12)
    run(app)
    assert result.state == states.FAILURE and result.failed() and not result.successful()
    assert isinstance(result.result, PaymentDeclined) and str(result.info) == "card declined for 12"
    assert "PaymentDeclined: card declined for 12" in (result.traceback or "")
    with pytest.raises(PaymentDeclined, match="card declined for 12"):
        result.get(timeout=1)
    assert isinstance(result.get(propagate=False), PaymentDeclined)
    failed = app.jobbridge_app().driver().failed.list(5)
    assert "PaymentDeclined: card declined for 12" in failed[0].error


def test_a_type_that_cannot_be_built_again_comes_back_wrapped_as_celery_stores_it(app: Celery) -> None:
    """Celery 5.5's worker stores an exception that fails a pickle round trip as UnpickleableExceptionWrapper."""
    @app.task
    def strict() -> None:
        raise NeedsKeyword(code=7)

    @app.task
    def two() -> None:
        raise NeedsTwo(7, "seven")

    result, built = strict.delay(), two.delay()
    run(app)
    with pytest.raises(UnpickleableExceptionWrapper) as caught:
        result.get()
    wrapper = caught.value
    assert (wrapper.exc_module, wrapper.exc_cls_name, wrapper.exc_args) == (__name__, "NeedsKeyword", ("code 7",))
    assert str(wrapper) == "NeedsKeyword('code 7')" and result.state == states.FAILURE
    assert type(wrapper.restore()).__name__ == "NeedsKeyword" and wrapper.restore().args == ("code 7",)
    with pytest.raises(NeedsTwo) as again:  # several arguments: built again from them, as Celery keeps them
        built.get()
    assert again.value.args == (7, "seven")


def test_a_type_this_process_cannot_import_gets_a_stand_in_naming_it() -> None:
    record = ResultRecord(id="x", state=states.FAILURE, error="Gone: code 7", exception_type="proj.nowhere.Gone")
    found = exception_of(record)
    assert isinstance(found, RemoteTaskError) and type(found).__name__ == "Gone"
    assert "proj.nowhere.Gone" in str(found) and "code 7" in str(found)


def test_get_raises_the_timeout_error_and_never_hangs(app: Celery) -> None:
    @app.task
    def slow() -> None: ...

    result = slow.delay()  # no worker runs it
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not finish within 0\.3s"):
        result.get(timeout=0.3)
    assert time.monotonic() - started < 5


def test_update_state_is_visible_to_a_poller_at_once(app: Celery) -> None:
    seen: list[tuple[str, Any]] = []

    @app.task(bind=True)
    def report(self: Task, total: int) -> str:
        for done in range(total):
            self.update_state(state="PROGRESS", meta={"done": done, "total": total})
            poll = app.AsyncResult(self.request.id)
            seen.append((poll.state, poll.info))
        self.update_state(state="PROGRESS", meta=[total])  # not a mapping: given back as it was
        seen.append((poll.state, poll.info))
        return "finished"

    result = report.delay(2)
    run(app)
    assert seen == [("PROGRESS", {"done": 0, "total": 2}), ("PROGRESS", {"done": 1, "total": 2}),
                    ("PROGRESS", [2])]
    assert result.state == states.SUCCESS and result.get() == "finished"


def test_update_state_refuses_a_meta_json_cannot_hold(app: Celery) -> None:
    @app.task(bind=True)
    def bad(self: Task) -> None:
        self.update_state(state="PROGRESS", meta={"at": {1, 2}})

    result = bad.delay()
    run(app)
    assert result.state == states.FAILURE and "cannot be stored as JSON" in str(result.result)


def test_track_started_from_the_task_or_the_setting(make_app: Callable[..., Celery]) -> None:
    app = make_app(result_backend="memory://", task_track_started=True)
    states_seen: list[str] = []

    @app.task(bind=True)
    def tracked(self: Task) -> None:
        states_seen.append(app.AsyncResult(self.request.id).state)

    @app.task(bind=True, track_started=False)
    def untracked(self: Task) -> None:
        states_seen.append(app.AsyncResult(self.request.id).state)

    tracked.delay()
    untracked.delay()
    run(app)
    assert states_seen == [states.STARTED, states.PENDING]


def test_ignore_result_from_the_task_the_setting_and_the_call(make_app: Callable[..., Celery]) -> None:
    app = make_app(result_backend="memory://", task_ignore_result=True)

    @app.task
    def quiet() -> int:
        return 1

    @app.task(ignore_result=False)
    def loud() -> int:
        return 2

    ignored, kept, asked = quiet.delay(), loud.delay(), quiet.apply_async(ignore_result=False)
    run(app)
    assert ignored.state == states.PENDING
    assert kept.get() == 2 and asked.get() == 1


def test_store_errors_even_if_ignored(make_app: Callable[..., Celery]) -> None:
    app = make_app(result_backend="memory://", task_store_errors_even_if_ignored=True)

    @app.task(ignore_result=True)
    def fails() -> None:
        raise KeyError("k")

    @app.task(ignore_result=True)
    def works() -> int:
        return 1

    failing, working = fails.delay(), works.delay()
    run(app)
    assert failing.state == states.FAILURE and isinstance(failing.result, KeyError)
    assert working.state == states.PENDING


def test_a_result_json_cannot_hold_is_stored_as_a_clear_failure(app: Celery) -> None:
    @app.task
    def odd() -> Any:
        return {1, 2}

    result = odd.delay()
    run(app)
    assert result.state == states.FAILURE and "JSON" in str(result.result)


def test_forget_drops_the_result(app: Celery) -> None:
    @app.task
    def one() -> int:
        return 1

    result = one.delay()
    run(app)
    assert result.get() == 1
    result.forget()
    assert app.AsyncResult(result.id).state == states.PENDING


def test_a_retry_resent_as_a_new_message_keeps_its_results_under_the_task_id(app: Celery) -> None:
    @app.task(bind=True, max_retries=3)
    def again(self: Task, n: int) -> int:
        if n < 2:
            raise self.retry(args=(n + 1,), countdown=0)
        return n

    result = again.delay(0)
    run(app)
    assert result.get(timeout=1) == 2


def test_results_expire_after_result_expires(make_app: Callable[..., Celery], clock: FixedClock) -> None:
    app = make_app(result_backend="memory://", result_expires=timedelta(minutes=5))

    @app.task
    def one() -> int:
        return 1

    result = one.delay()
    run(app)
    assert app.AsyncResult(result.id).state == states.SUCCESS
    clock.advance(301)
    assert app.AsyncResult(result.id).state == states.PENDING


def test_waiting_inside_a_task_is_refused_as_in_celery(app: Celery) -> None:
    @app.task
    def inner() -> int:
        return 1

    @app.task
    def outer() -> None:
        inner.delay().get(timeout=1)

    result = outer.delay()
    run(app)
    assert isinstance(result.result, RuntimeError) and "Never call result.get() within a task" in str(result.result)


def test_eager_results_are_complete_and_stored_when_asked(make_app: Callable[..., Celery]) -> None:
    app = make_app(result_backend="memory://", task_always_eager=True, task_store_eager_result=True)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    result = add.delay(1, 2)
    assert isinstance(result, EagerResult) and result.get() == 3 and result.info == 3
    assert app.AsyncResult(result.id).get() == 3
    result.revoke()
    assert result.state == states.REVOKED and result.ready()


# -- without a result backend -------------------------------------------------------------------

def test_without_a_backend_reads_say_to_set_result_backend(make_app: Callable[..., Celery]) -> None:
    app = make_app()

    @app.task(bind=True)
    def work(self: Task) -> int:
        self.update_state(state="PROGRESS", meta={"n": 1})  # dropped, as in Celery
        return 1

    result = work.delay()
    assert app.jobbridge_app().run_pending().succeeded == 1
    with pytest.raises(ResultsNotEnabled, match=r"result_backend \(CELERY_RESULT_BACKEND\)"):
        result.get()


# -- the result_backend setting -----------------------------------------------------------------

@pytest.mark.parametrize(("backend", "url"), [
    ("redis://h:6379/1", "redis://h:6379/1"),
    ("rediss://h:6380/0", "rediss://h:6380/0"),
    ("db+postgresql://u@h/app", "postgresql://u@h/app"),
    ("db+mysql+pymysql://u@h/app", "mysql+pymysql://u@h/app"),
    ("db+sqlite:///results.sqlite3", "sqlite:///results.sqlite3"),
    ("sqlite:///r.db", "sqlite:///r.db"),
    ("cache+memory://", "memory://"),
])
def test_result_backend_urls_map_to_result_stores(backend: str, url: str) -> None:
    assert results_url(backend) == url


@pytest.mark.parametrize(("backend", "says"), [
    ("rpc://", "over AMQP"), ("amqp://guest@localhost//", "RabbitMQ"), ("django-db", "django://default"),
    ("mongodb://h/db", "redis or a database"), ("cache+memcached://h:11211/", "redis or a database"),
])
def test_result_backends_jobbridge_cannot_use_are_refused_with_what_to_write(
        make_app: Callable[..., Celery], backend: str, says: str) -> None:
    with pytest.raises(RefusedFeature, match=says):
        make_app(result_backend=backend)


def test_the_old_database_backend_reads_database_url(make_app: Callable[..., Celery], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'results.sqlite3'}"
    app = make_app(CELERY_RESULT_BACKEND="database", CELERY_RESULT_DBURI=url)
    assert app.jobbridge_app().settings.results == url
    with pytest.raises(ImproperlyConfigured, match="database_url"):
        make_app(result_backend="database").jobbridge_app()


def test_the_brokers_own_store_keeps_the_brokers_settings(make_app: Callable[..., Celery], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    same = make_app(broker=f"sqla+{url}", result_backend=f"db+{url}")
    other = make_app(broker=f"sqla+{url}", result_backend=f"db+sqlite:///{tmp_path / 'results.sqlite3'}")
    assert same.jobbridge_app().settings.results is None
    assert other.jobbridge_app().settings.results == f"sqlite:///{tmp_path / 'results.sqlite3'}"


def test_result_expires_is_the_result_ttl(make_app: Callable[..., Celery]) -> None:
    assert ttl(None) == NEVER and ttl(0) == NEVER and ttl(timedelta(hours=2)) == 7200.0
    app = make_app(result_backend="memory://", CELERY_TASK_RESULT_EXPIRES=600)
    assert app.jobbridge_app().settings.result_ttl == 600.0
    with pytest.raises(ImproperlyConfigured, match="result_expires"):
        make_app(result_expires="soon")


def test_result_backend_in_the_environment_overrides_the_setting(
        make_app: Callable[..., Celery], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELERY_RESULT_BACKEND", "memory://")
    app = make_app(result_backend="redis://elsewhere:6379/1")
    assert app.conf.result_backend == "memory://"


def test_worker_deduplicate_successful_tasks(make_app: Callable[..., Celery]) -> None:
    app = make_app(result_backend="memory://", worker_deduplicate_successful_tasks=True)
    ran: list[int] = []

    @app.task
    def once() -> int:
        ran.append(1)
        return 1

    once.apply_async(task_id="same-id")
    run(app)
    once.apply_async(task_id="same-id")  # delivered again: it already succeeded
    run(app)
    assert ran == [1]


def test_celery_result_module_names_resolve() -> None:
    from jobbridge.compat import install

    modules = install.build()
    result = modules["celery.result"]
    assert {"AsyncResult", "EagerResult", "GroupResult", "ResultSet"} <= set(vars(result))
    assert {"chain", "group", "chord", "chunks", "maybe_signature"} <= set(vars(modules["celery"]))


def test_get_rides_out_a_store_that_cannot_be_reached_for_a_while(
        app: Celery, monkeypatch: pytest.MonkeyPatch) -> None:
    from jobbridge.errors import DriverUnavailable

    @app.task
    def one() -> int:
        return 1

    result = one.delay()
    run(app)
    real_wait, calls = app.backend.wait, []

    def flaky_wait(task_id: str, timeout: float) -> Any:
        calls.append(task_id)
        if len(calls) == 1:
            raise DriverUnavailable("connection refused (the store restarts)")
        return real_wait(task_id, timeout)

    monkeypatch.setattr(app.backend, "wait", flaky_wait)
    monkeypatch.setattr(AsyncResult, "_record", lambda self: None)  # nothing read yet: go to the wait
    assert result.get(timeout=10) == 1 and len(calls) == 2
    calls.clear()
    monkeypatch.setattr(app.backend, "wait", lambda task_id, timeout: (_ for _ in ()).throw(
        DriverUnavailable("still down")))
    with pytest.raises(TimeoutError, match="could not be reached"):
        result.get(timeout=0.5)


def test_info_read_right_after_state_describes_the_same_record(app: Celery) -> None:
    @app.task(bind=True)
    def step(self: Task) -> str:
        self.update_state(state="PROGRESS", meta={"done": 1})
        poll = app.AsyncResult(self.request.id)
        assert poll.state == "PROGRESS"
        self.update_state(state="PROGRESS", meta={"done": 2})
        assert poll.info == {"done": 1}  # what state read, not what came after
        return "ok"

    result = step.delay()
    run(app)
    assert result.get(timeout=1) == "ok"
