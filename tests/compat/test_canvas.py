"""The canvas: signatures, chain, group, chord, link / link_error, map / starmap / chunks, replace.

Run in the test's thread (``run_pending``) on the memory driver and on SQLite with a
fixed clock, and eagerly. The chord tests check the join: one counter in the store,
each header task counting itself once, the body published once with the results in
header order, and a failure ending the chord once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jobbridge.compat import (
    Celery,
    GroupResult,
    RefusedFeature,
    ResultsNotEnabled,
    Signature,
    Task,
    chain,
    chord,
    group,
    signature,
    states,
)
from jobbridge.compat.exceptions import ChordError

from jobbridge.testing import FixedClock
from jobbridge.testing.contract import pending

from .conftest import Recorder


@pytest.fixture(params=["memory", "sqlite"])
def app(request: pytest.FixtureRequest, make_app: Callable[..., Celery], tmp_path: Path) -> Celery:
    if request.param == "memory":
        return make_app(result_backend="memory://")
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    return make_app(broker=f"sqla+{url}", result_backend=f"db+{url}")


class Tasks:
    """The tasks of one app, and what they were called with."""

    def __init__(self, app: Celery) -> None:
        self.calls: list[tuple[str, Any]] = []

        @app.task
        def add(x: int, y: int) -> int:
            return x + y

        @app.task
        def total(values: list[int]) -> int:
            self.calls.append(("total", values))
            return sum(values)

        @app.task
        def fail(x: int) -> None:
            raise ValueError(f"bad {x}")

        @app.task
        def on_error(task_id: str) -> None:
            self.calls.append(("on_error", task_id))

        @app.task
        def on_error_full(request: Any, exc: BaseException, traceback: str | None) -> None:
            self.calls.append(("on_error_full", (request.id, repr(exc), bool(traceback))))

        @app.task
        def record(value: Any) -> None:
            self.calls.append(("record", value))

        self.add, self.total, self.fail, self.record = add, total, fail, record
        self.on_error, self.on_error_full = on_error, on_error_full

    def of(self, name: str) -> list[Any]:
        return [value for found, value in self.calls if found == name]


def run(app: Celery) -> None:
    app.jobbridge_app().run_pending()


# -- signatures -----------------------------------------------------------------------------------

def test_signatures_are_json_dicts_with_partial_arguments(app: Celery) -> None:
    t = Tasks(app)
    sig = t.add.s(2).set(countdown=0)
    assert dict(sig)["args"] == (2,) and sig.options == {"countdown": 0} and not sig.immutable
    again = signature(json.loads(json.dumps(sig)), app=app)
    assert isinstance(again, Signature) and again.task == t.add.name and again.args == (2,)
    clone = sig.clone((5,), queue="q")
    assert clone.args == (5, 2) and clone.options == {"countdown": 0, "queue": "q"} and sig.args == (2,)
    frozen = t.add.si(1, 1)
    assert frozen.immutable and frozen.clone((9,)).args == (1, 1) and frozen.delay(100)
    assert sig(3) == 5  # calling a signature runs the task here
    nested = chain(t.add.s(1, 1), group(t.add.s(1), t.add.s(2)), t.total.s())
    assert isinstance(signature(json.loads(json.dumps(nested)), app=app), chain)


# -- chains ---------------------------------------------------------------------------------------

def test_a_chain_passes_each_result_to_the_next(app: Celery) -> None:
    t = Tasks(app)
    result = chain(t.add.s(1, 2), t.add.s(10), t.add.si(100, 100), t.add.s(1)).apply_async()
    run(app)
    assert result.get(timeout=1) == 201
    assert result.parent.get() == 200 and result.parent.parent.get() == 13
    assert (t.add.s(1, 1) | t.add.s(1) | t.record.s()).delay() is not None
    run(app)
    assert t.of("record") == [3]


def test_a_chain_stops_at_a_failure_and_its_errback_runs(app: Celery) -> None:
    t = Tasks(app)
    result = chain(t.add.s(1, 1), t.fail.s(), t.record.s()).on_error(t.on_error.s()).apply_async()
    run(app)
    assert t.of("record") == [] and result.state == states.FAILURE  # as Celery stores the steps never run
    with pytest.raises(ValueError, match="bad 2"):
        result.get(timeout=1)
    assert t.of("on_error") == [result.parent.id]


def test_the_message_carries_the_chain_as_celerys_body_does(app: Celery, recorder: Recorder) -> None:
    t = Tasks(app)
    chain(t.add.s(1, 1), t.add.s(2), t.record.s()).apply_async()
    (body,) = [e["body"] for e in recorder.of("before_task_publish")]
    embed = body[2]
    assert [step["task"] for step in embed["chain"]] == [t.record.name, t.add.name]
    assert embed["callbacks"] is None and embed["errbacks"] is None and embed["chord"] is None
    (headers,) = [e["headers"] for e in recorder.of("before_task_publish")]
    assert headers["chain"] == embed["chain"]


# -- link / link_error ----------------------------------------------------------------------------

def test_link_and_link_error_on_apply_async(app: Celery) -> None:
    t = Tasks(app)
    t.add.apply_async((2, 2), link=t.record.s())
    failed = t.fail.apply_async((1,), link_error=[t.on_error.s(), t.on_error_full.s()])
    run(app)
    assert t.of("record") == [4]
    assert t.of("on_error") == [failed.id]
    assert t.of("on_error_full") == [(failed.id, "ValueError('bad 1')", True)]


def test_link_and_link_error_in_eager_mode(make_app: Callable[..., Celery]) -> None:
    app = make_app(task_always_eager=True)
    t = Tasks(app)
    t.add.apply_async((1, 2), link=t.record.s())
    t.fail.apply_async((1,), link_error=t.on_error.s())
    assert t.of("record") == [3] and len(t.of("on_error")) == 1


# -- groups ---------------------------------------------------------------------------------------

def test_a_group_returns_a_group_result(app: Celery) -> None:
    t = Tasks(app)
    result = group(t.add.s(i, i) for i in range(4)).apply_async()
    assert isinstance(result, GroupResult) and len(result) == 4 and result.id
    assert result.completed_count() == 0 and not result.ready() and result.waiting()
    run(app)
    assert result.get(timeout=1) == [0, 2, 4, 6] and result.join() == [0, 2, 4, 6]
    assert result.ready() and result.successful() and not result.failed() and result.completed_count() == 4
    assert [r.get() for r in result.results] == [0, 2, 4, 6]
    result.save()
    restored = app.GroupResult.restore(str(result.id))
    assert restored is not None and restored.get() == [0, 2, 4, 6]


def test_a_group_with_a_failure(app: Celery) -> None:
    t = Tasks(app)
    result = group(t.add.s(1, 1), t.fail.s(2)).apply_async()
    run(app)
    assert result.ready() and result.failed() and not result.successful() and result.completed_count() == 1
    with pytest.raises(ValueError, match="bad 2"):
        result.get(timeout=1)
    assert result.get(propagate=False)[0] == 2


def test_groups_and_chords_need_a_result_backend(make_app: Callable[..., Celery]) -> None:
    app = make_app()
    t = Tasks(app)
    with pytest.raises(ResultsNotEnabled, match=r"a group needs a result backend.*result_backend"):
        group(t.add.s(1, 1)).apply_async()
    with pytest.raises(ResultsNotEnabled, match=r"a chord needs a result backend.*result_backend"):
        chord([t.add.s(1, 1)], t.total.s()).apply_async()
    with pytest.raises(ResultsNotEnabled, match="a chain with a group or a chord in it"):
        chain(t.add.s(1, 1), group(t.add.s(1), t.add.s(2))).apply_async()
    assert pending(app.jobbridge_app().driver(), "celery") == 0


# -- chords ---------------------------------------------------------------------------------------

def test_a_chord_calls_its_body_once_with_every_result_in_order(app: Celery) -> None:
    t = Tasks(app)
    result = chord([t.add.s(i, 0) for i in range(10)], t.total.s()).apply_async()
    run(app)
    assert t.of("total") == [list(range(10))] and result.get(timeout=1) == 45
    assert isinstance(result.parent, GroupResult) and result.parent.get() == list(range(10))


def test_chord_spellings(app: Celery) -> None:
    t = Tasks(app)
    called = chord(t.add.s(i, i) for i in range(3))(t.total.s())
    piped = (group(t.add.s(1, 1), t.add.s(2, 2)) | t.total.s()).delay()
    in_chain = chain(t.add.s(1, 1), group(t.add.s(1), t.add.s(2)), t.total.s(), t.record.s()).apply_async()
    run(app)
    assert called.get(timeout=1) == 6 and piped.get(timeout=1) == 6 and in_chain.parent.get(timeout=1) == 7
    assert t.of("record") == [7]


def test_a_failed_header_task_fails_the_chord_once_and_the_body_never_runs(app: Celery) -> None:
    t = Tasks(app)
    header = [t.add.s(1, 1), t.fail.s(2), t.add.s(3, 3), t.fail.s(4)]
    result = chord(header, t.total.s()).on_error(t.on_error.s()).apply_async()
    run(app)
    assert t.of("total") == []
    assert t.of("on_error") == [result.id]  # once, with the chord's id, as Celery calls a chord's errback
    assert result.state == states.FAILURE
    with pytest.raises(ChordError, match=r"Dependency .* raised ValueError\('bad [24]'\)"):
        result.get(timeout=1, follow_parents=False)  # the chord's own record
    with pytest.raises(ValueError, match=r"bad [24]"):
        result.get(timeout=1)  # its parent, the header, failed first: Celery raises that task's error


def test_a_chord_errback_taking_the_request_is_called_in_the_worker(app: Celery) -> None:
    t = Tasks(app)
    result = chord([t.fail.s(1)], t.total.s()).on_error(t.on_error_full.s()).apply_async()
    run(app)
    ((failed_id, error, _),) = t.of("on_error_full")
    assert failed_id == result.id and "ChordError" in error and "bad 1" in error


def test_a_header_task_run_again_after_its_worker_was_lost_counts_once(app: Celery, clock: FixedClock) -> None:
    t = Tasks(app)
    result = chord([t.add.s(i, i) for i in range(3)], t.total.s()).apply_async()
    bridge = app.jobbridge_app()
    driver, executor = bridge.driver(), bridge.executor()
    (lost,) = driver.reserve(["celery"], 1)
    executor.run(lost)  # it ran and counted itself, then its worker died before acknowledging it
    clock.advance(bridge.settings.reservation + 1)
    driver.reclaim_expired()
    run(app)
    assert t.of("total") == [[0, 2, 4]] and result.get(timeout=1) == 6


def test_a_revoked_header_task_fails_the_chord(app: Celery, recorder: Recorder) -> None:
    t = Tasks(app)
    result = chord([t.add.s(1, 1), t.add.s(2, 2)], t.total.s()).apply_async()
    result.parent.results[1].revoke()
    run(app)
    assert t.of("total") == [] and result.state == states.FAILURE
    assert "TaskRevokedError" in str(result.result)
    (revoked,) = recorder.of("task_revoked")
    assert revoked["request"].id == result.parent.results[1].id and revoked["terminated"] is False


def test_eager_chains_groups_and_chords(make_app: Callable[..., Celery]) -> None:
    app = make_app(task_always_eager=True)
    t = Tasks(app)
    assert chain(t.add.s(1, 1), t.add.s(1)).apply_async().get() == 3
    assert group(t.add.s(1, 1), t.add.s(2, 2)).apply_async().get() == [2, 4]
    assert chord([t.add.s(1, 1), t.add.s(2, 2)], t.total.s()).apply_async().get() == 6
    failed = chord([t.fail.s(1)], t.total.s()).apply_async()
    assert failed.state == states.FAILURE and isinstance(failed.result, ChordError)


# -- map, starmap, chunks ------------------------------------------------------------------------

def test_map_starmap_and_chunks(app: Celery) -> None:
    t = Tasks(app)
    mapped = t.total.map([[1, 2], [3]]).apply_async()
    starred = t.add.starmap([(1, 1), (2, 2)]).delay()
    chunked = t.add.chunks([(i, i) for i in range(5)], 2).apply_async()
    run(app)
    assert mapped.get(timeout=1) == [3, 3] and starred.get(timeout=1) == [2, 4]
    assert chunked.get(timeout=1) == [[0, 2], [4, 6], [8]]
    assert "celery.map" in app.tasks and "celery.starmap" in app.tasks


# -- replace --------------------------------------------------------------------------------------

def test_replace_hands_the_task_id_and_what_follows_to_the_new_task(app: Celery) -> None:
    t = Tasks(app)

    @app.task(bind=True)
    def indirect(self: Task, x: int) -> Any:
        return self.replace(t.add.s(x, 100))

    result = chain(indirect.s(1), t.record.s()).apply_async()
    run(app)
    assert t.of("record") == [101]
    assert result.parent.get(timeout=1) == 101


def test_replace_by_a_group_gives_the_groups_results(app: Celery) -> None:
    t = Tasks(app)

    @app.task(bind=True)
    def to_group(self: Task) -> Any:
        return self.replace(group(t.add.s(1, 1), t.add.s(2, 2)))

    result = chain(to_group.s(), t.record.s()).apply_async()
    run(app)
    assert result.parent.get(timeout=1) == [2, 4] and t.of("record") == [[2, 4]]


def test_a_chords_errback_on_each_header_task_when_the_setting_asks(make_app: Callable[..., Celery]) -> None:
    app = make_app(result_backend="memory://", task_allow_error_cb_on_chord_header=True)
    t = Tasks(app)
    header = [t.fail.s(1), t.add.s(1, 1)]
    result = chord(header, t.total.s()).on_error(t.record.si("failed")).apply_async()
    run(app)
    assert t.of("record") == ["failed", "failed"]  # the header task's copy (made immutable) and the chord's
    assert result.state == states.FAILURE


def test_a_groups_link_is_refused_and_its_revoke_reaches_every_task(app: Celery) -> None:
    t = Tasks(app)
    with pytest.raises(RefusedFeature, match="use a chord"):
        group(t.add.s(1, 1)).apply_async(link=t.record.s())
    result = group(t.record.s(1), t.record.s(2)).apply_async()
    result.revoke()
    run(app)
    assert t.of("record") == [] and all(r.state == states.REVOKED for r in result.results)


def test_a_chains_own_options(app: Celery) -> None:
    t = Tasks(app)
    result = chain(t.add.s(1, 1), t.add.s(1)).apply_async(task_id="the-last", link=t.record.s())
    run(app)
    assert result.id == "the-last" and result.get(timeout=1) == 3 and t.of("record") == [3]


def test_a_chord_as_the_last_step_of_a_chain_takes_the_chains_id(app: Celery) -> None:
    t = Tasks(app)
    flow = chain(t.add.s(1, 1), chord([t.add.s(1), t.add.s(2)], t.total.s()))
    result = flow.apply_async(task_id="chain-end", link=t.record.s())
    run(app)
    assert result.id == "chain-end" and result.get(timeout=1) == 7 and t.of("record") == [7]
    assert t.of("total") == [[3, 4]]
