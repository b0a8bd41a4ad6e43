"""Calling tasks: delay / apply_async options, argument checks, routing, signatures, send_task."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from jobbridge.compat import AsyncResult, Celery, RefusedFeature, ResultsNotEnabled, Task
from jobbridge.compat.codec import EncodeError
from jobbridge.compat.exceptions import QueueNotFound
from kombu import Queue

from jobbridge.testing import FixedClock
from jobbridge.testing.contract import pending as pending_on

from .conftest import Recorder

seen: list[Any] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    seen.clear()


def pending(app: Celery, queue: str = "celery") -> int:
    return pending_on(app.jobbridge_app().driver(), queue)


def run(app: Celery, *queues: str) -> Any:
    return app.jobbridge_app().run_pending(list(queues or ["celery"]))


def test_a_task_is_named_module_function_and_runs_from_delay(app: Celery) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        seen.append(x + y)
        return x + y

    assert add.name == "tests.compat.test_calling.add"
    assert isinstance(add, Task)
    result = add.delay(2, 3)
    assert isinstance(result, AsyncResult) and result.id == result.task_id == str(result)
    assert pending(app) == 1 and seen == []
    stats = run(app)
    assert stats.succeeded == 1 and seen == [5]
    assert app.tasks[add.name] is add


def test_the_job_is_named_after_the_task_and_carries_args_and_kwargs(app: Celery) -> None:
    @app.task(name="mail.send")
    def send(to: str, subject: str = "") -> None: ...

    send.apply_async(("a@example.com",), {"subject": "hi"})
    (res,) = app.jobbridge_app().driver().reserve(["celery"], 1)
    assert res.envelope.name == "mail.send"
    assert dict(res.envelope.payload) == {"args": ["a@example.com"], "kwargs": {"subject": "hi"}}
    assert res.envelope.headers["task"] == "mail.send" and res.envelope.headers["id"] == res.envelope.id


def test_wrong_arguments_raise_type_error_at_the_call(app: Celery) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    with pytest.raises(TypeError, match="missing a required argument: 'y'"):
        add.delay(1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        add.apply_async((1, 2), {"z": 3})
    assert pending(app) == 0


def test_bound_tasks_check_arguments_without_self(app: Celery) -> None:
    @app.task(bind=True)
    def hello(self: Task, name: str) -> str:
        return f"{self.name}: {name}"

    hello.delay("ann")
    with pytest.raises(TypeError):
        hello.delay()
    assert hello("bob") == "tests.compat.test_calling.hello: bob"


def test_typing_false_skips_the_check(make_app: Any) -> None:
    app = make_app(strict_typing=False)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    add.delay(1)  # Celery's strict_typing=False: the worker finds out
    assert pending(app) == 1


def test_an_argument_that_is_not_json_fails_at_the_call_naming_it(app: Celery) -> None:
    @app.task
    def notify(user: Any, note: str = "") -> None: ...

    class User:
        pass

    with pytest.raises(EncodeError, match=r"argument 'user' \(position 0\).*User.*pass .*id"):
        notify.delay(User())
    with pytest.raises(TypeError, match="argument 'note'"):
        notify.delay(1, note={1, 2})
    assert pending(app) == 0


def test_datetimes_uuids_and_decimals_arrive_as_themselves(app: Celery) -> None:
    @app.task
    def typed(when: datetime, key: uuid.UUID, amount: Decimal, items: list[Any]) -> None:
        seen.append((when, key, amount, items))

    moment, key = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC), uuid.uuid4()
    typed.delay(moment, key, Decimal("1.10"), (1, "x"))
    run(app)
    assert seen == [(moment, key, Decimal("1.10"), [1, "x"])]


def test_countdown_and_eta_delay_the_task(app: Celery, clock: FixedClock) -> None:
    @app.task
    def later() -> None:
        seen.append(clock.now())

    later.apply_async(countdown=30)
    later.apply_async(eta=datetime.fromtimestamp(clock.now() + 60, UTC))
    assert run(app).processed == 0
    clock.advance(31)
    assert run(app).processed == 1
    clock.advance(30)
    assert run(app).processed == 1
    with pytest.raises(ValueError, match="countdown= or eta="):
        later.apply_async(countdown=1, eta=datetime.now(UTC))


def test_a_naive_eta_is_read_in_the_app_timezone(make_app: Any, clock: FixedClock) -> None:
    app = make_app(timezone="Europe/Paris")

    @app.task
    def later() -> None: ...

    paris = datetime.fromtimestamp(clock.now(), UTC).astimezone(app.now().tzinfo).replace(tzinfo=None)
    later.apply_async(eta=paris + timedelta(seconds=10))
    assert run(app).processed == 0
    clock.advance(11)
    assert run(app).processed == 1


def test_expires_acknowledges_an_expired_task_unrun(app: Celery, clock: FixedClock, recorder: Recorder) -> None:
    @app.task
    def stale() -> None:
        seen.append("ran")

    stale.apply_async(countdown=20, expires=10)
    clock.advance(21)
    stats = run(app)
    assert seen == [] and stats.processed == 1 and pending(app) == 0
    (revoked,) = recorder.of("task_revoked")
    assert revoked["expired"] is True and revoked["terminated"] is False
    assert app.jobbridge_app().driver().failed.count() == 0


def test_task_id_and_headers_reach_the_request(app: Celery) -> None:
    @app.task(bind=True)
    def show(self: Task) -> None:
        seen.append((self.request.id, self.request.headers, self.request.delivery_info["routing_key"]))

    result = show.apply_async(task_id="my-id", headers={"tenant": "acme"}, queue="other")
    assert result.id == "my-id"
    run(app, "other")
    assert seen == [("my-id", {"tenant": "acme"}, "other")]


def test_options_jobbridge_cannot_honour_are_refused_at_the_call(app: Celery) -> None:
    @app.task
    def job() -> None: ...

    with pytest.raises(RefusedFeature, match="by queue, not by message priority"):
        job.apply_async(priority=5)
    with pytest.raises(RefusedFeature, match=r"pickle|JSON"):
        job.apply_async(serializer="pickle")
    with pytest.raises(RefusedFeature, match="its own name"):
        job.apply_async(shadow="other.name")
    with pytest.raises(TypeError, match="did you mean 'countdown'"):
        job.apply_async(countdwn=3)
    job.apply_async(priority=None, retry=True, retry_policy={"max_retries": 3}, routing_key="celery")
    assert pending(app) == 1


def test_routing_order_call_then_task_then_routes_then_default(make_app: Any) -> None:
    app = make_app(task_routes={"proj.mail.*": {"queue": "mail"}, "proj.reports.build": "reports"},
                   task_default_queue="default")

    @app.task(name="proj.mail.send")
    def send() -> None: ...

    @app.task(name="proj.reports.build")
    def build() -> None: ...

    @app.task(name="proj.other", queue="pinned")
    def other() -> None: ...

    @app.task(name="proj.plain")
    def plain() -> None: ...

    send.delay()
    build.delay()
    other.delay()
    plain.delay()
    send.apply_async(queue="urgent")
    driver = app.jobbridge_app().driver()
    counts = {q: pending_on(driver, q) for q in ("mail", "reports", "pinned", "default", "urgent")}
    assert counts == {"mail": 1, "reports": 1, "pinned": 1, "default": 1, "urgent": 1}


def test_router_functions_and_missing_queues(make_app: Any) -> None:
    def router(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **kw: Any) -> Any:
        return {"queue": "big"} if args and args[0] > 10 else None

    app = make_app(task_routes=[router], task_queues=[Queue("celery"), Queue("big")],
                   task_create_missing_queues=False)

    @app.task
    def size(n: int) -> None: ...

    size.delay(50)
    size.delay(1)
    assert pending(app, "big") == 1 and pending(app, "celery") == 1
    with pytest.raises(QueueNotFound):
        size.apply_async((1,), queue="nowhere")


def test_patching_delay_on_the_task_works(app: Celery) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    with mock.patch.object(add, "delay") as fake:
        add.delay(1, 2)
    fake.assert_called_once_with(1, 2)
    assert pending(app) == 0
    add.delay(1, 2)
    assert pending(app) == 1


def test_calling_directly_and_run_execute_here(app: Celery) -> None:
    @app.task(bind=True)
    def where(self: Task, x: int) -> Any:
        return (x, self.request.called_directly, self.request.id)

    assert where(1) == (1, True, None)
    assert where.run(2) == (2, True, None)
    assert pending(app) == 0


def test_signatures_delay_with_partial_arguments(app: Celery) -> None:
    @app.task
    def add(x: int, y: int) -> None:
        seen.append(x + y)

    sig = add.s(1)
    assert sig.task == add.name and sig.args == (1,)
    sig.delay(2)
    add.si(5, 5).delay(100)  # immutable: the call's arguments are ignored
    add.signature((3, 4)).set(queue="celery").apply_async()
    add.s(1, 1)()  # calling a signature runs the task here
    assert seen.pop() == 2
    run(app)
    assert sorted(seen) == [3, 7, 10]
    assert repr(add.s(1) | add.s()) == f"{add.name}(1) | {add.name}()"


def test_send_task_publishes_by_name_without_the_task(app: Celery) -> None:
    result = app.send_task("elsewhere.task", args=[1], kwargs={"a": 2}, countdown=5, queue="remote")
    driver = app.jobbridge_app().driver()
    assert pending_on(driver, "remote") == 1
    assert isinstance(result, AsyncResult)


def test_without_a_result_backend_reading_a_result_says_to_set_one(app: Celery) -> None:
    @app.task
    def noop() -> None: ...

    result = noop.delay()
    for read in (lambda: result.get(), lambda: result.state, lambda: result.ready(), lambda: result.result):
        with pytest.raises(ResultsNotEnabled, match="result_backend"):
            read()
    assert app.AsyncResult(result.id) == result


def test_publish_signals_carry_celerys_body_and_headers(app: Celery, recorder: Recorder) -> None:
    @app.task
    def add(x: int, y: int) -> None: ...

    result = add.apply_async((1,), {"y": 2}, queue="celery")
    before, after = recorder.of("before_task_publish"), recorder.of("after_task_publish")
    assert recorder.names()[:2] == ["before_task_publish", "after_task_publish"]
    assert before[0]["body"] == ([1], {"y": 2}, {"callbacks": None, "errbacks": None, "chain": None,
                                                 "chord": None})
    assert before[0]["headers"]["task"] == add.name and before[0]["headers"]["id"] == result.id
    assert before[0]["routing_key"] == "celery" and before[0]["exchange"] == ""
    assert after[0]["headers"]["id"] == result.id
    (_, sender, _), *_ = recorder.events
    assert sender == add.name


def test_a_publish_receiver_may_add_headers(app: Celery) -> None:
    from jobbridge.compat import signals

    def stamp(headers: dict[str, Any], **kwargs: Any) -> None:
        headers["trace_id"] = "t-1"

    signals.before_task_publish.connect(stamp)
    try:
        @app.task(bind=True)
        def show(self: Task) -> None:
            seen.append(self.request.headers.get("trace_id"))

        show.delay()
        run(app)
    finally:
        signals.before_task_publish.disconnect(stamp)
    assert seen == ["t-1"]


def test_args_must_be_a_list_or_tuple(app: Celery) -> None:
    @app.task
    def echo(text: str) -> None: ...

    with pytest.raises(TypeError, match="args must be a list or tuple"):
        echo.apply_async("hello")
    with pytest.raises(TypeError, match="kwargs must be a mapping"):
        echo.apply_async((), [("text", "x")])
