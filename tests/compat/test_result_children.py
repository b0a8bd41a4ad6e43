"""``AsyncResult.children``: the results a task applied, stored with its result, as Celery stores them.

Celery's worker adds to the running task's ``request.children`` each task it applies
(``add_to_parent``), a group as one ``GroupResult``, and applies the callbacks and the chain's
next step before it stores the result "so that result.children is populated" (celery/app/trace.py);
the errbacks taking a task id are applied as one group. A chord's body that never ran is stored
failed with the children of the task that failed it (celery/backends/base.py
``chord_error_from_stack``), which Celery's test_chord_on_error walks:
``res.children[0].children[0].result``. Tasks run in the test's thread (``run_pending``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from jobbridge.compat import AsyncResult, Celery, GroupResult, chord, group


@pytest.fixture
def app(make_app: Callable[..., Celery]) -> Celery:
    return make_app(result_backend="memory://")


@pytest.fixture
def tasks(app: Celery) -> dict[str, Any]:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task
    def spawn() -> str:
        return str(add.delay(1, 1).id)

    @app.task
    def spawn_group() -> None:
        group(add.s(1, 1), add.s(2, 2)).delay()

    @app.task
    def fail() -> None:
        raise ValueError("expected")

    @app.task
    def errback_old_style(request_id: str) -> str:
        return request_id

    return {"add": add, "spawn": spawn, "spawn_group": spawn_group, "fail": fail,
            "errback_old_style": errback_old_style}


def work(app: Celery) -> None:
    app.jobbridge_app().run_pending()


def test_a_task_that_applied_another_has_it_as_its_child(app: Celery, tasks: dict[str, Any]) -> None:
    result = tasks["spawn"].delay()
    assert result.children is None  # nothing known before it ran
    work(app)
    (child,) = result.children
    assert isinstance(child, AsyncResult) and child.id == result.get(timeout=1) and child.get(timeout=1) == 2


def test_a_group_applied_by_a_task_is_one_child(app: Celery, tasks: dict[str, Any]) -> None:
    result = tasks["spawn_group"].delay()
    work(app)
    (child,) = result.children
    assert isinstance(child, GroupResult) and child.get(timeout=1) == [2, 4]


def test_callbacks_and_the_chains_next_step_are_children(app: Celery, tasks: dict[str, Any]) -> None:
    add = tasks["add"]
    first = add.s(1, 1)
    first.link(add.s(10))
    last = (first | add.s(100)).delay()
    work(app)
    assert last.get(timeout=1) == 102
    assert sorted(child.get(timeout=1) for child in last.parent.children) == [12, 102]
    assert last.children == []  # over, and applied nothing


def test_a_failed_chords_result_has_its_errbacks_as_children(app: Celery, tasks: dict[str, Any]) -> None:
    add, fail = tasks["add"], tasks["fail"]
    result = chord([add.s(1, 2), fail.s()], add.s(0).on_error(tasks["errback_old_style"].s())).delay()
    work(app)
    (errbacks,) = result.children
    assert isinstance(errbacks, GroupResult)
    (errback,) = errbacks.children
    assert errback.result == result.id  # the errback got the body's id, as Celery's do
    assert "ValueError" in str(AsyncResult(errback.result, app=app).result)


def test_collect_walks_the_children_depth_first(app: Celery, tasks: dict[str, Any]) -> None:
    result = tasks["spawn"].delay()
    work(app)
    (parent, value), (child, child_value) = result.collect()
    assert (parent.id, child.id) == (result.id, value) and child_value == 2
