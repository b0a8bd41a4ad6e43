"""A chord's errbacks, its join and its result's children, as Celery's test_chord expects them.

What Celery 5.5 does (celery/canvas.py ``_chord.link_error``, celery/backends/base.py, and the
assertions of t/integration/test_canvas.py's errback tests): ``chord.tasks`` are the same objects
at each read, so an errback linked to each stays linked; with ``task_allow_error_cb_on_chord_header``
the chord's errback is also linked (immutable) to each header task, called once per failed one;
``get()`` on a chord failed by its header raises the header task's own exception; one frozen task
id may be the body of two chords in turn; the last header task run again after its worker was
lost publishes the body once; a header member that is a chain ending in a group holds that group's
results list in the body's argument, and a failure in that group fails the chord once.
Tasks run in the test's thread (``run_pending``) on the memory driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from jobbridge.compat import Celery, chain, chord, group, states

from jobbridge.testing import FixedClock


class Boom(Exception):
    """The header task's own failure, which ``get()`` raises rather than the chord's ChordError."""


@pytest.fixture
def app(make_app: Callable[..., Celery]) -> Celery:
    return make_app(result_backend="memory://")


@pytest.fixture
def tasks(app: Celery) -> dict[str, Any]:
    seen: list[Any] = []

    @app.task
    def identity(x: Any) -> Any:
        return x

    @app.task
    def fail(*args: Any) -> None:
        raise Boom("expected", *args)

    @app.task
    def echo(message: str) -> None:
        seen.append(message)

    @app.task
    def note(x: int) -> int:
        seen.append(("note", x))
        return x

    @app.task
    def tsum(values: list[int]) -> int:
        seen.append(("tsum", values))
        return sum(values)

    return {"identity": identity, "fail": fail, "echo": echo, "note": note, "tsum": tsum, "seen": seen}


def work(app: Celery) -> None:
    app.jobbridge_app().run_pending()


def test_errbacks_linked_to_each_of_chord_tasks_stay_linked(app: Celery, tasks: dict[str, Any]) -> None:
    fail, identity, echo = tasks["fail"], tasks["identity"], tasks["echo"]
    app.conf.task_allow_error_cb_on_chord_header = True
    sig = chord((fail.si(), identity.si(42), fail.si()), echo.si("body"))
    for header_task in sig.tasks:
        header_task.link_error(echo.si("header errback"))
    sig.body.link_error(echo.si("body errback"))
    result = sig.delay()
    work(app)
    with pytest.raises(Boom):
        result.get(timeout=1)
    assert sorted(tasks["seen"]) == ["body errback", "header errback", "header errback"]


@pytest.mark.parametrize(("flag", "expected"), [(True, 3), (False, 1)])
def test_the_flag_links_a_chords_errback_to_each_header_task(app: Celery, tasks: dict[str, Any], flag: bool,
                                                             expected: int) -> None:
    fail, identity, echo = tasks["fail"], tasks["identity"], tasks["echo"]
    app.conf.task_allow_error_cb_on_chord_header = flag
    sig = chord((fail.si(), identity.si(42), fail.si()), echo.si("body"))
    sig.link_error(echo.si("errback"))
    result = sig.delay()
    work(app)
    with pytest.raises(Boom):
        result.get(timeout=1)
    assert tasks["seen"] == ["errback"] * expected  # 2 failed header tasks + the body, or the body only


def test_an_upgraded_chord_links_the_chains_errback_to_each_step(app: Celery, tasks: dict[str, Any]) -> None:
    fail, identity, echo = tasks["fail"], tasks["identity"], tasks["echo"]
    app.conf.task_allow_error_cb_on_chord_header = True
    sig = chain(group([fail.si(), identity.si(42), fail.si()]), echo.si("body"))
    sig.link_error(echo.si("errback"))
    result = sig.delay()
    work(app)
    with pytest.raises(Boom):
        result.get(timeout=1)
    assert tasks["seen"] == ["errback"] * 3


def test_a_chord_failed_before_get_raises_its_header_tasks_failure(app: Celery, tasks: dict[str, Any]) -> None:
    fail, identity, tsum = tasks["fail"], tasks["identity"], tasks["tsum"]
    result = chord((group(identity.si(1), *(fail.s() for _ in range(5))),), tsum.s()).delay()
    work(app)
    assert result.state == states.FAILURE  # the chord's own ChordError is stored ...
    with pytest.raises(Boom):  # ... but get() follows the parents first, as Celery's does
        result.get(timeout=1)


def test_one_frozen_task_may_be_the_body_of_two_chords_in_turn(app: Celery, tasks: dict[str, Any]) -> None:
    identity, tsum = tasks["identity"], tasks["tsum"]
    body = tsum.s()
    body_id = body.freeze().id
    first = chord((identity.si(1), identity.si(2)), body).delay()
    work(app)
    assert first.get(timeout=1) == 3
    second = chord((identity.si(3), identity.si(4)), body).delay()
    work(app)
    assert second.id == body_id and second.get(timeout=1) == 7
    assert [seen for seen in tasks["seen"] if seen[0] == "tsum"] == [("tsum", [1, 2]), ("tsum", [3, 4])]


def test_the_last_header_task_run_again_publishes_the_body_once(app: Celery, tasks: dict[str, Any],
                                                                clock: FixedClock) -> None:
    identity, tsum = tasks["identity"], tasks["tsum"]
    result = chord([identity.si(i) for i in range(3)], tsum.s()).delay()
    bridge = app.jobbridge_app()
    driver, executor = bridge.driver(), bridge.executor()
    for lost in driver.reserve(["celery"], 3):
        executor.run(lost)  # each ran and counted itself (the last joined), then the worker died unacknowledged
    clock.advance(bridge.settings.reservation + 1)
    driver.reclaim_expired()
    work(app)
    assert tasks["seen"] == [("tsum", [0, 1, 2])] and result.get(timeout=1) == 3


# -- a header that is a generator: each task sent as it is yielded ---------------------------------

def _generated(app: Celery, tasks: dict[str, Any], size: int, run_after: int) -> Any:
    """Yield ``note.si(i)``; after the ``run_after``-th, run what was sent and check that it ran."""
    for i in range(size):
        if i == run_after:
            work(app)
            assert ("note", 0) in tasks["seen"], "the header was read to its end before its first task was sent"
        yield tasks["note"].si(i)
    if run_after == size:
        work(app)  # every header task ends before the sender knows the size: the sender joins


@pytest.mark.parametrize("run_after", [1, 2, 3])
def test_a_generator_header_is_sent_as_it_is_generated(app: Celery, tasks: dict[str, Any], run_after: int) -> None:
    result = chord(_generated(app, tasks, 3, run_after), tasks["tsum"].s()).delay()
    work(app)
    assert result.get(timeout=1) == 3
    assert [seen for seen in tasks["seen"] if seen[0] == "tsum"] == [("tsum", [0, 1, 2])]
    assert [r.id for r in result.parent.results] == app.backend.restore_group(result.parent.id)


def test_a_generator_group_is_sent_as_it_is_generated(app: Celery, tasks: dict[str, Any]) -> None:
    result = group(_generated(app, tasks, 3, 1)).delay()
    work(app)
    assert result.get(timeout=1) == [0, 1, 2]


def test_a_generator_header_task_that_fails_fails_the_chord(app: Celery, tasks: dict[str, Any]) -> None:
    def header() -> Any:
        yield tasks["note"].si(0)
        yield tasks["fail"].si()
        work(app)

    result = chord(header(), tasks["tsum"].s()).delay()
    work(app)
    with pytest.raises(Boom):
        result.get(timeout=1)
    assert result.state == states.FAILURE and not [s for s in tasks["seen"] if s[0] == "tsum"]


def test_a_signature_has_its_tasks_name_as_name(tasks: dict[str, Any]) -> None:
    """Celery's duck typing, which its test_flag_allow_error_cb_on_chord_header_on_upgraded_chord reads."""
    fail = tasks["fail"]
    assert fail.si().name == fail.name and fail.s().parent_id is None and fail.s().root_id is None


def test_a_chord_in_the_header_that_fails_calls_the_outer_errback_once(app: Celery, tasks: dict[str, Any]) -> None:
    """Celery's test_nested_chord_header_link_error: the errback runs once, the outer body never."""
    fail, identity, echo = tasks["fail"], tasks["identity"], tasks["echo"]
    app.conf.task_allow_error_cb_on_chord_header = False
    inner = chord([identity.si("t1"), fail.si()], identity.si("t2 (body)"))
    outer = chord(group([identity.si("t3"), inner]), echo.si("body"))
    outer.link_error(echo.si("errback"))
    outer.delay()
    work(app)
    assert tasks["seen"] == ["errback"]


# -- a chain ending in a group, in a chord's header --------------------------------------------------

def test_a_header_chain_ending_in_a_group_gives_the_body_that_groups_results(app: Celery,
                                                                               tasks: dict[str, Any]) -> None:
    """Celery's test_nested_chord_group_chain_group_tail: the member's place holds the group's list."""
    identity, note = tasks["identity"], tasks["note"]
    nested = chain(identity.si(5), group(note.s(), note.s()))
    deeper = chain(identity.si(6), group(note.s(), chain(identity.s(), group(note.s(), note.s()))))
    result = chord([identity.si(1), nested, deeper], identity.s()).delay()
    work(app)
    assert result.get(timeout=1) == [1, [5, 5], [6, [6, 6]]]
    assert sorted(seen for seen in tasks["seen"] if seen[0] == "note") == [("note", 5)] * 2 + [("note", 6)] * 3


def test_a_header_chain_ending_in_a_group_runs_the_body_once_its_last_step_is_done(
        app: Celery, tasks: dict[str, Any]) -> None:
    """Celery's test_nested_group_chain: a group holding such a chain, followed by a task, is a chord."""
    identity, tsum = tasks["identity"], tasks["tsum"]
    inner = chain(identity.si(2), group(identity.si(3), identity.si(4)))
    result = chain(identity.si(0), group(identity.si(1), inner), tsum.si([10, 1]))()
    work(app)
    assert result.get(timeout=1) == 11


def test_a_failure_in_a_header_chains_closing_group_fails_the_chord_once(app: Celery,
                                                                          tasks: dict[str, Any]) -> None:
    fail, identity, echo, tsum = tasks["fail"], tasks["identity"], tasks["echo"], tasks["tsum"]
    nested = chain(identity.si(5), group(fail.s(), fail.s(), identity.s()))
    outer = chord([identity.si(1), nested], tsum.s())
    outer.link_error(echo.si("errback"))
    result = outer.delay()
    work(app)
    assert tasks["seen"] == ["errback"]  # once, though two tasks of the group failed; the body never ran
    assert result.state == states.FAILURE
    with pytest.raises(Boom):
        result.get(timeout=1)


def test_a_failure_before_a_header_chains_closing_group_fails_the_chord_once(app: Celery,
                                                                             tasks: dict[str, Any]) -> None:
    fail, identity, echo, tsum = tasks["fail"], tasks["identity"], tasks["echo"], tasks["tsum"]
    nested = chain(fail.si(), group(identity.si(2), identity.si(3)))
    outer = chord([identity.si(1), nested], tsum.s())
    outer.link_error(echo.si("errback"))
    result = outer.delay()
    work(app)
    assert tasks["seen"] == ["errback"] and result.state == states.FAILURE


# -- what an ordinary chord's join costs the result store ----------------------------------------------

STORE_CALLS = ("store", "get", "get_many", "forget", "cancel", "cancelled", "counter_init", "counter_decrement")


def _spy_on_store(app: Celery) -> list[tuple[str, Any]]:
    """Record each call on the app's result store, as (method, first argument), in the order made."""
    store = app.backend.require("a test")
    calls: list[tuple[str, Any]] = []

    def spying(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, args[0] if args else None))
            return real(*args, **kwargs)
        return spy

    for name in STORE_CALLS:
        setattr(store, name, spying(name, getattr(store, name)))
    return calls


def test_an_ordinary_chords_join_takes_no_claim(app: Celery, tasks: dict[str, Any]) -> None:
    """Only a header sent from a generator can see its join counter at 0 twice; an ordinary chord's
    last header task joins without a claim counter's round trip."""
    identity, tsum = tasks["identity"], tasks["tsum"]
    calls = _spy_on_store(app)
    result = chord([identity.si(i) for i in range(3)], tsum.s()).delay()
    work(app)
    assert result.get(timeout=1) == 3
    group_id = result.parent.id
    decrements = [key for name, key in calls if name == "counter_decrement"]
    assert decrements == [group_id] * 3  # one per header task, by the join counter's key only


def test_a_generator_headers_join_still_takes_its_claim(app: Celery, tasks: dict[str, Any]) -> None:
    calls = _spy_on_store(app)
    result = chord(_generated(app, tasks, 3, 3), tasks["tsum"].s()).delay()
    work(app)
    assert result.get(timeout=1) == 3
    assert ("counter_decrement", result.parent.id + ":claim") in calls
    assert [seen for seen in tasks["seen"] if seen[0] == "tsum"] == [("tsum", [0, 1, 2])]
