"""Celery's signals: Celery's call convention, sender filters, order, robustness, refusals, logging."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from jobbridge.compat import Celery, RefusedFeature, signals
from jobbridge.compat.signals import Signal, logging_is_configured_by_app

from .conftest import Recorder


def test_receivers_get_celerys_keyword_arguments_and_decorators_work() -> None:
    sig = Signal("example")
    got: list[Any] = []

    @sig.connect
    def bare(sender: Any = None, **kwargs: Any) -> str:
        got.append(("bare", sender, kwargs))
        return "bare"

    @sig.connect(sender="tasks.add")
    def only_add(sender: Any = None, x: int = 0, **kwargs: Any) -> None:
        got.append(("add", sender, x))

    responses = sig.send(sender="tasks.mul", x=1)
    assert got == [("bare", "tasks.mul", {"signal": sig, "x": 1})]
    assert responses == [(bare, "bare")]
    got.clear()
    sig.send(sender="tasks.add", x=2)
    assert sorted(name for name, *_ in got) == ["add", "bare"]


def test_a_sender_object_filters_by_identity() -> None:
    sig = Signal("by_object")
    got: list[Any] = []
    mine, other = object(), object()
    sig.connect(lambda sender=None, **kw: got.append(sender), sender=mine, weak=False)
    sig.send(sender=other)
    sig.send(sender=mine)
    assert got == [mine]


def test_dispatch_uid_connects_once_and_disconnects() -> None:
    sig = Signal("uid")
    got: list[int] = []

    def receiver(**kwargs: Any) -> None:
        got.append(1)

    sig.connect(receiver, dispatch_uid="one")
    sig.connect(receiver, dispatch_uid="one")
    sig.send(sender=None)
    assert got == [1]
    assert sig.disconnect(dispatch_uid="one")
    sig.send(sender=None)
    assert got == [1]


def test_a_receiver_that_raises_is_logged_and_the_rest_run(caplog: pytest.LogCaptureFixture) -> None:
    sig = Signal("robust")
    got: list[str] = []

    def broken(**kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    def fine(**kwargs: Any) -> None:
        got.append("fine")

    sig.connect(broken)
    sig.connect(fine)
    with caplog.at_level(logging.ERROR):
        responses = sig.send(sender=None)
    assert got == ["fine"] and isinstance(responses[0][1], RuntimeError)
    assert "receiver of celery signal robust raised" in caplog.text


def test_a_raising_task_receiver_never_breaks_the_worker(app: Celery) -> None:
    def broken(**kwargs: Any) -> None:
        raise RuntimeError("bug")

    signals.task_prerun.connect(broken)
    signals.task_postrun.connect(broken)
    try:
        @app.task
        def fine() -> int:
            return 1

        fine.delay()
        assert app.jobbridge_app().run_pending(["celery"]).succeeded == 1
    finally:
        signals.task_prerun.disconnect(broken)
        signals.task_postrun.disconnect(broken)


def test_task_signals_come_in_celerys_order_with_celerys_arguments(app: Celery, recorder: Recorder) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    result = add.delay(1, 2)
    app.jobbridge_app().run_pending(["celery"])
    assert recorder.names() == ["before_task_publish", "after_task_publish", "task_received", "task_prerun",
                                "task_success", "task_postrun"]
    prerun, postrun, success = recorder.of("task_prerun")[0], recorder.of("task_postrun")[0], recorder.of(
        "task_success")[0]
    assert prerun == {"task_id": result.id, "task": add, "args": [1, 2], "kwargs": {}}
    assert postrun["retval"] == 3 and postrun["state"] == "SUCCESS" and postrun["task_id"] == result.id
    assert success["result"] == 3 and success["runtime"] >= 0
    senders = {name: sender for name, sender, _ in recorder.events}
    assert senders["task_prerun"] is add and senders["before_task_publish"] == add.name


def test_task_failure_carries_exception_traceback_and_einfo(app: Celery, recorder: Recorder) -> None:
    @app.task
    def boom(n: int) -> None:
        raise ValueError(f"bad {n}")

    result = boom.delay(7)
    app.jobbridge_app().run_pending(["celery"])
    (failure,) = recorder.of("task_failure")
    assert failure["task_id"] == result.id and failure["args"] == [7] and failure["kwargs"] == {}
    assert isinstance(failure["exception"], ValueError) and failure["traceback"] is not None
    assert "bad 7" in str(failure["einfo"]) and failure["einfo"].type is ValueError


def test_signals_jobbridge_cannot_fire_refuse_connect() -> None:
    for sig in (signals.heartbeat_sent, signals.eventlet_pool_started,
                signals.worker_before_create_process):
        with pytest.raises(RefusedFeature, match="not available on jobbridge"):
            sig.connect(lambda **kw: None)


def test_connecting_setup_logging_tells_jobbridge_to_leave_logging_alone() -> None:
    assert not logging_is_configured_by_app()
    got: list[Any] = []

    def configure(loglevel: Any = None, **kwargs: Any) -> None:
        got.append(loglevel)

    signals.setup_logging.connect(configure)
    try:
        assert logging_is_configured_by_app()
        assert signals.configure_logging("INFO")
        assert got == ["INFO"]
    finally:
        signals.setup_logging.disconnect(configure)
    assert not logging_is_configured_by_app()
    assert not signals.configure_logging("INFO")


def test_a_message_for_an_unknown_task_sends_task_unknown(app: Celery, clock: Any) -> None:
    from jobbridge import Envelope

    got: list[Any] = []

    def unknown(name: str = "", exc: Any = None, **kwargs: Any) -> None:
        got.append((name, type(exc).__name__))

    signals.task_unknown.connect(unknown)
    try:
        bridge = app.jobbridge_app()
        bridge.push([Envelope(id="m-1", name="gone.task", queue="celery", payload={"args": [], "kwargs": {}},
                              tries=1, timeout=10, available_at=clock.now(), created_at=clock.now())])
        assert bridge.run_pending(["celery"]).failed == 1
    finally:
        signals.task_unknown.disconnect(unknown)
    assert got == [("gone.task", "NotRegistered")]
