"""What real Celery code found different, in this process: each as Celery 5.7 was seen to behave.

Signatures' fields are settable (``sig.args = ...``, as Celery's integration tasks write);
``@shared_task`` may be stacked on ``@app.task``; a task whose soft time limit is past its
hard one imports, runs by ``apply()`` and directly, and is refused when it is sent (a
``ValueError``, Celery's words); a second instance of a class-based task registered once
the app is in use replaces the first; ``get()`` on a call that asked for no result is None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from jobbridge.compat import Celery, Signature, Task, chain, chord, group, shared_task, states

from .test_canvas import run


@pytest.fixture
def app(make_app: Callable[..., Celery]) -> Celery:
    return make_app(result_backend="memory://")


def test_a_signatures_fields_can_be_set(app: Celery) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    sig = add.s(1, 1)
    sig.args = (2, 3)
    sig.kwargs = {}
    sig.options = {"countdown": None}
    sig.immutable = True
    assert dict(sig)["args"] == (2, 3) and sig.args == (2, 3) and sig["immutable"] is True
    sig.id = "fixed-id"
    assert sig.options["task_id"] == "fixed-id" and sig.freeze().id == "fixed-id"
    sig.subtask_type = None
    sig.task = add.name
    assert Signature.from_dict(dict(sig)) == sig
    result = sig.apply_async((100,))  # immutable now: the given argument is ignored
    run(app)
    assert result.id == "fixed-id" and result.get(timeout=1) == 5


def test_shared_task_stacked_on_app_task_is_the_same_task(app: Celery, make_app: Callable[..., Celery]) -> None:
    @shared_task
    @app.task
    def tripled(x: int) -> int:
        return x * 3

    @shared_task(bind=True)
    @app.task(bind=True)
    def named(self: Task) -> str:
        return str(self.name)

    assert tripled.name == app.tasks[tripled.name].name and tripled(2) == 6
    result = tripled.delay(3)
    run(app)
    assert result.get(timeout=1) == 9
    other = make_app("other")  # made later: it has the shared task too, under the same name
    assert other.tasks[tripled.name](4) == 12 and other.tasks[named.name]() == named.name


def test_a_soft_limit_past_the_hard_one_is_refused_when_sent(app: Celery) -> None:
    @app.task(soft_time_limit=10, time_limit=5)
    def odd() -> str:
        return "ran"

    assert odd() == "ran" and odd.apply().get() == "ran"
    with pytest.raises(ValueError, match=r"^soft_time_limit must be less than or equal to time_limit"):
        odd.delay()
    with pytest.raises(ValueError, match=r"^soft_time_limit must be less than or equal to time_limit"):
        odd.s().apply_async()
    ok = odd.apply_async(soft_time_limit=4)
    run(app)
    assert ok.get(timeout=1) == "ran"


def test_a_second_instance_of_a_class_task_replaces_the_first(make_app: Callable[..., Celery]) -> None:
    app = make_app(result_backend="memory://")

    class Greet(app.Task):  # type: ignore[name-defined,misc]
        name = "proj.greet"

        def __init__(self, greeting: str = "hello") -> None:
            super().__init__()
            self.greeting = greeting

        def run(self, who: str) -> str:
            return f"{self.greeting} {who}"

    app.register_task(Greet())
    first = app.tasks["proj.greet"].delay("ann")
    run(app)  # the app is in use: its JobBridge is built, the job registered
    second = Greet("bonjour")
    assert app.register_task(second) is second and app.tasks["proj.greet"] is second
    later = app.tasks["proj.greet"].delay("bob")
    run(app)
    assert first.get(timeout=1) == "hello ann" and later.get(timeout=1) == "bonjour bob"


def test_get_of_a_call_that_keeps_no_result_is_none_at_once(make_app: Callable[..., Celery]) -> None:
    app = make_app(result_backend="memory://")

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(ignore_result=True)
    def quiet() -> int:
        return 1

    ignored = add.apply_async((1, 2), ignore_result=True)
    assert ignored.ignored is True and ignored.get() is None  # nothing ran yet: no wait at all
    assert quiet.delay().get() is None and add.delay(1, 1).ignored is False
    run(app)
    assert ignored.state == states.PENDING and ignored.result is None


def test_a_chain_read_while_it_runs_raises_its_failed_parent(app: Celery) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task
    def fail(x: int) -> Any:
        raise ValueError(f"bad {x}")

    result = chain(add.s(1, 1), fail.s(), add.s(5)).apply_async()
    calls: list[int] = []

    def between() -> None:  # what a worker does meanwhile: the chain runs while get() waits
        calls.append(1)
        run(app)

    with pytest.raises(ValueError, match="bad 2"):
        result.get(timeout=10, interval=0.05, on_interval=between)
    assert calls and result.state == states.FAILURE and result.parent.state == states.FAILURE


def test_a_header_task_replaced_by_a_group_holds_their_results_in_the_chord(app: Celery) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task
    def collect(values: list[Any]) -> list[Any]:
        return values

    @app.task(bind=True)
    def fan_out(self: Task, n: int) -> Any:
        return self.replace(group(add.s(i, i) for i in range(n)))

    result = chord([fan_out.s(3), add.s(1, 1)], collect.s()).apply_async()
    for _ in range(5):
        run(app)
    assert result.get(timeout=1) == [[0, 2, 4], 2]
