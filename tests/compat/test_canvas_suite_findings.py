"""The canvas cases Celery's own integration suite (t/integration/test_canvas.py) found different.

Each expectation is what Celery 5.5 does (its canvas source, and its suite's assertions):
a group followed by a group followed by a task is a chord whose body is a chord; an
inner chain keeps its links when it is flattened into another; a group may hold a
chain that ends in a group; ``self.replace(chain())`` fails with Celery's
ImproperlyConfigured; a task that returns an AsyncResult stores its ``as_tuple()``;
``backend.ensure_chords_allowed()`` is there; ``apply_async(throw=...)`` is
``apply()``'s under ``task_always_eager``; a chord's result has its header's GroupResult as
parent (a chain's parents walk through it); ``chord.body.freeze().id`` is the id the chord's
errbacks get; an errback carried in a message's headers keeps its bytes. Tasks run in the test's thread
(``run_pending``) on the memory driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from jobbridge.compat import (
    AsyncResult,
    Celery,
    GroupResult,
    ImproperlyConfigured,
    RefusedFeature,
    Task,
    chain,
    chord,
    group,
    states,
)


@pytest.fixture
def app(make_app: Callable[..., Celery]) -> Celery:
    return make_app(result_backend="memory://")


@pytest.fixture
def tasks(app: Celery) -> dict[str, Any]:
    seen: list[Any] = []

    @app.task
    def add(x: Any, y: Any) -> Any:
        return x + y

    @app.task
    def tsum(values: list[int]) -> int:
        return sum(values)

    @app.task
    def identity(x: Any) -> Any:
        return x

    @app.task
    def record(value: Any) -> None:
        seen.append(value)

    @app.task(bind=True)
    def replace_with_empty_chain(self: Task, *_: Any) -> Any:
        return self.replace(chain())

    @app.task
    def build_chain() -> Any:
        return (add.s(1, 1) | add.s(2)).apply_async()

    return {"add": add, "tsum": tsum, "identity": identity, "record": record, "seen": seen,
            "replace_with_empty_chain": replace_with_empty_chain, "build_chain": build_chain}


def work(app: Celery) -> None:
    app.jobbridge_app().run_pending()


def test_a_task_a_group_a_group_and_a_task_chain_as_celery_builds_it(app: Celery, tasks: dict[str, Any]) -> None:
    add, tsum = tasks["add"], tasks["tsum"]
    result = (add.si(1, 0) | group(add.s(1), add.s(1)) | group(tsum.s(), tsum.s()) | tsum.s())()
    work(app)
    assert result.get(timeout=5) == 8


def test_an_inner_chain_keeps_its_links_when_flattened(app: Celery, tasks: dict[str, Any]) -> None:
    add, identity, record = tasks["add"], tasks["identity"], tasks["record"]
    inner = chain(identity.s("a"), add.s("b"))
    inner.link(record.si("link b"))
    inner.link_error(record.si("link error"))
    flat = chain(inner, add.s("c"))
    assert [len(s.options.get("link_error") or []) for s in flat.tasks] == [1, 1, 0]
    result = flat.delay()
    work(app)
    assert result.get(timeout=5) == "abc"
    assert tasks["seen"] == ["link b"]
    piped = inner | add.s("c")  # the same through |, as Celery's unchain_tasks
    assert [len(s.options.get("link") or []) for s in piped.tasks] == [0, 1, 0]


def test_a_group_may_hold_a_chain_that_ends_in_a_group(app: Celery, tasks: dict[str, Any]) -> None:
    identity = tasks["identity"]
    nested = chain(identity.si(5), group([identity.si(3), identity.si(4)]))
    result = group(identity.si(1), identity.si(2), nested).delay()
    work(app)
    assert result.get(timeout=5) == [1, 2, [3, 4]]


def test_replacing_a_task_with_an_empty_chain_fails_as_in_celery(app: Celery, tasks: dict[str, Any]) -> None:
    result = chain(tasks["identity"].s(1), tasks["replace_with_empty_chain"].s()).delay()
    work(app)
    with pytest.raises(ImproperlyConfigured, match="Cannot replace with an empty chain"):
        result.get(timeout=5)
    assert result.state == states.FAILURE


def test_a_returned_async_result_is_stored_as_its_tuple(app: Celery, tasks: dict[str, Any]) -> None:
    outer = tasks["build_chain"].delay()
    work(app)
    stored = outer.get(timeout=5)
    (last_id, parent), children = stored
    assert children is None and isinstance(parent, list) and parent[1] is None
    assert app.AsyncResult(last_id).get(timeout=5) == 4


def test_ensure_chords_allowed_says_whether_a_chord_can_run(make_app: Callable[..., Celery]) -> None:
    make_app(result_backend="memory://").backend.ensure_chords_allowed()
    with pytest.raises(NotImplementedError, match="needs a result backend"):
        make_app().backend.ensure_chords_allowed()


def test_throw_is_applys_option_under_task_always_eager(make_app: Callable[..., Celery]) -> None:
    app = make_app(task_always_eager=True)

    @app.task
    def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        fail.apply_async(throw=True)
    assert fail.apply_async(throw=False).state == states.FAILURE


def test_a_task_itself_is_a_group_member_with_no_arguments(app: Celery, tasks: dict[str, Any]) -> None:
    add, tsum = tasks["add"], tasks["tsum"]
    body = chain(tsum.s(), group(add.s(8), add.s(16)), tsum.s() | add.s(32))
    result = chord([add.s(0, 1)], chord([tsum, tsum], body)).apply_async()
    for _ in range(3):
        work(app)
    assert result.get(timeout=5) == 60


def test_freezing_a_chain_gives_it_its_last_task_s_id(tasks: dict[str, Any]) -> None:
    add = tasks["add"]
    last = add.s(2).set(task_id="42")
    made = add.s(4) | last
    assert made.id is None
    assert made.freeze(last.id).id == "42" and made.id == "42"


def test_a_replacement_chain_keeps_its_errback_beside_the_replaced_task_s(app: Celery, tasks: dict[str, Any]) -> None:
    identity, add, record = tasks["identity"], tasks["add"], tasks["record"]

    @app.task
    def raise_error(*_: Any) -> None:
        raise ValueError("deliberate error")

    @app.task(bind=True)
    def replace_with_chain_which_raises(self: Task, *args: Any) -> Any:
        inner = chain(identity.s(*args), raise_error.s())
        inner.link_error(record.si("inner errback"))
        return self.replace(inner)

    outer = chain(identity.s("Hello "), replace_with_chain_which_raises.s(), add.s("world"))
    outer.link_error(record.si("outer errback"))
    result = outer.delay()
    for _ in range(3):
        work(app)
    with pytest.raises(ValueError, match="deliberate error"):
        result.get(timeout=5)
    assert sorted(tasks["seen"]) == ["inner errback", "outer errback"]


def test_group_link_is_refused_naming_the_chord(app: Celery, tasks: dict[str, Any]) -> None:
    identity = tasks["identity"]
    linked = group(identity.si(42), identity.si(1337))
    linked.link(tasks["record"].si("done"))
    with pytest.raises(RefusedFeature, match=r"first task only.*use a chord: chord\(group, callback\)"):
        linked.delay()


def test_a_chords_result_has_its_headers_group_result_as_parent(app: Celery, tasks: dict[str, Any]) -> None:
    """Celery's chord freeze: the body's earliest result gets the header's GroupResult as its parent."""
    add, tsum, identity = tasks["add"], tasks["tsum"], tasks["identity"]
    first = add.si(1, 1)
    first_id = first.freeze().id
    res = chain(first, add.si(2, 2), chord(group(add.si(i, i) for i in range(3)), tsum.s() | identity.s()))()
    header = res.parent.parent
    assert isinstance(header, GroupResult)
    assert isinstance(res.parent, AsyncResult) and not isinstance(res.parent, GroupResult)
    assert header.parent.parent.id == first_id and header.parent.parent.parent is None
    work(app)
    assert res.get(timeout=5) == 6
    assert res.parent.get(timeout=5) == 6 and header.get(timeout=5) == [0, 2, 4]
    assert header.parent.get(timeout=5) == 4


def test_a_chord_applied_alone_has_its_header_as_parent(app: Celery, tasks: dict[str, Any]) -> None:
    add, tsum = tasks["add"], tasks["tsum"]
    res = chord([add.si(1, 1), add.si(2, 2)], tsum.s()).apply_async()
    assert isinstance(res.parent, GroupResult) and res.parent.parent is None
    work(app)
    assert res.get(timeout=5) == 6 and res.parent.get(timeout=5) == [2, 4]


def test_a_chords_errback_gets_the_id_its_frozen_body_was_given(app: Celery, tasks: dict[str, Any]) -> None:
    """Celery's suite freezes ``chord.body`` and waits for the errback with that id (a header task failed)."""
    seen = tasks["seen"]

    @app.task
    def fail(*_: Any) -> None:
        raise ValueError("expected")

    c = chord([fail.s()], tasks["identity"].s())
    c.link_error(tasks["record"].s())
    body_id = c.body.freeze().id
    res = c.delay()
    assert res.id == body_id
    work(app)
    assert seen == [body_id]
    with pytest.raises(ValueError):
        res.get(timeout=5)


def test_an_errback_carried_in_the_message_keeps_its_bytes(app: Celery, tasks: dict[str, Any]) -> None:
    """The chord's errback travels in the message's headers: its bytes arrive as bytes, as kombu's json sends them."""
    seen = tasks["seen"]

    @app.task
    def fail(*_: Any) -> None:
        raise ValueError("expected")

    @app.task
    def echo(message: Any, key: str = "echo") -> None:  # two parameters: called in the worker, from the headers
        seen.append((message, key))

    c = chord([fail.s()], tasks["identity"].s())
    c.link_error(echo.si(b"echo", key="k"))
    c.delay()
    work(app)
    assert seen == [(b"echo", "k")]
