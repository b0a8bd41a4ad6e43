"""Results, chords and revokes with real ``jobbridge worker -A ...`` processes, on SQLite and on Redis.

The test process plays the web process: it dispatches, polls ``AsyncResult`` and
revokes; the workers' tasks record what they did to a file the test reads.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from jobbridge.compat import chord, states
from jobbridge.compat.exceptions import ChordError, TimeoutError

from .projects import Worker, load, of, start, use

pytestmark = pytest.mark.slow


def poll(read: Any, done: Any, what: str, seconds: float = 30.0) -> list[Any]:
    """Call ``read()`` until ``done(answer)``, as a view polled by a page would be; every answer seen."""
    seen: list[Any] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append(read())
        if done(seen[-1]):
            return seen
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}; saw {seen[-5:]}")


def stopped(worker: Worker) -> list[list[Any]]:
    assert worker.stop() == 0, worker.output()
    return worker.events()


def test_a_view_polls_a_progress_task_until_success(tmp_path: Path, store: dict[str, str]) -> None:
    app = use(load("flaskproj").celery)
    views = load("flaskproj.views")
    worker = start(tmp_path, "flaskproj:celery", store, "-Q", "default,mail")
    try:
        body, status = views.start_report(20)
        assert status == 202
        seen = poll(lambda: views.report_status(body["task_id"]), lambda s: s["state"] == "SUCCESS",
                    "the report to be built")
        stopped(worker)
    finally:
        worker.kill()
        app.close()
    progress = [s["done"] for s in seen if s["state"] == "PROGRESS"]
    assert progress and progress == sorted(progress) and all(s.get("total") in (20, None) for s in seen)
    assert seen[-1] == {"state": "SUCCESS", "result": {"rows": 20, "url": f"/reports/{body['task_id']}.csv"}}
    assert {s["state"] for s in seen} <= {"PENDING", "PROGRESS", "SUCCESS"}


def test_a_chord_of_fifty_fails_once_or_joins_once(tmp_path: Path, store: dict[str, str]) -> None:
    project = load("chordproj")
    app = use(project.app)
    worker = start(tmp_path, "chordproj", store, "-c", "8")
    try:
        failing = chord([project.square.s(i, fail_at=17) for i in range(50)],
                        project.collect.s()).on_error(project.chord_failed.s()).apply_async()
        with pytest.raises(ChordError, match=r"raised ValueError\('square 17 failed'\)"):
            failing.get(timeout=60, follow_parents=False)
        with pytest.raises(ValueError, match="square 17 failed"):
            failing.get(timeout=5)  # the failed header task's error, through the parent, as in Celery
        joined = chord([project.square.s(i) for i in range(50)], project.collect.s()).apply_async()
        assert joined.get(timeout=60) == sum(i * i for i in range(50))
        worker.wait_for(lambda ev: len(of(ev, "square")) == 100 and of(ev, "chord_failed"), "every header task")
        events = stopped(worker)
    finally:
        worker.kill()
        app.close()
    assert of(events, "chord_failed") == [["chord_failed", failing.id]]
    assert of(events, "collect") == [["collect", [i * i for i in range(50)]]]
    assert failing.state == states.FAILURE and joined.state == states.SUCCESS


def test_a_worker_killed_mid_chord_does_not_hang_it(tmp_path: Path, store: dict[str, str]) -> None:
    project = load("chordproj")
    app = use(project.app)
    short = {"JOBBRIDGE_RESERVATION": "3"}
    first = start(tmp_path / "first", "chordproj", store, "-c", "4", **short)
    second: Worker | None = None
    try:
        result = chord([project.square.s(i, pause=1.0) for i in range(8)], project.collect.s()).apply_async()
        first.wait_for(lambda ev: len(of(ev, "square")) >= 4, "the first header tasks to start")
        first.kill()  # SIGKILL: its running header tasks are neither finished nor acknowledged
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            result.get(timeout=5)  # no worker: the wait ends at its timeout, it never hangs
        assert 4 <= time.monotonic() - started < 15
        second = start(tmp_path / "second", "chordproj", store, "-c", "4", **short)
        assert result.get(timeout=60) == sum(i * i for i in range(8))
        second.wait_for(lambda ev: of(ev, "collect"), "the body")
        events = [*first.events(), *stopped(second)]
    finally:
        first.kill()
        if second is not None:
            second.kill()
        app.close()
    assert of(events, "collect") == [["collect", [i * i for i in range(8)]]]
    assert sorted({e[1] for e in of(events, "square")}) == list(range(8))


def test_revoke_a_queued_task_and_terminate_a_running_one(tmp_path: Path, store: dict[str, str]) -> None:
    project = load("chordproj")
    app = use(project.app)
    queued, kept = project.mark.delay(1), project.mark.delay(2)
    queued.revoke()  # no worker is running: the revoke waits in the store
    worker = start(tmp_path, "chordproj", store, "-c", "2", JOBBRIDGE_RESERVATION="3")
    try:
        assert kept.get(timeout=30) == 2
        long = project.sleeper.delay(60)
        worker.wait_for(lambda ev: of(ev, "sleeper_started"), "the long task to start")
        app.control.revoke(long.id, terminate=True)
        poll(lambda: long.state, lambda state: state == states.REVOKED, "the long task to be stopped", 20)
        worker.wait_for(lambda ev: len(of(ev, "task_revoked")) == 2, "both revokes to be reported")
        events = stopped(worker)
    finally:
        worker.kill()
        app.close()
    assert of(events, "mark") == [["mark", 2]] and queued.state == states.REVOKED
    assert of(events, "sleeper_finished") == []
    assert sorted(of(events, "task_revoked")) == sorted([["task_revoked", queued.id, False],
                                                         ["task_revoked", long.id, True]])


def test_a_chord_whose_header_is_a_generator_joins_as_it_is_sent(tmp_path: Path, store: dict[str, str]) -> None:
    """Celery's test_generator: each header task is sent as the generator yields it, so the worker
    ends the first ones before the last is generated, and the body still gets every result in order."""
    project = load("chordproj")
    app = use(project.app)
    worker = start(tmp_path, "chordproj", store, "-c", "2")

    def header(size: int, finished_before_last: int) -> Any:
        for i in range(size):
            if i == size - 1:
                worker.wait_for(lambda ev: len(of(ev, "square")) >= finished_before_last, "the first header tasks")
            yield project.square.s(i)

    try:
        partly = chord(header(5, 2), project.collect.s()).apply_async()
        assert partly.get(timeout=60) == sum(i * i for i in range(5))
        worker.wait_for(lambda ev: len(of(ev, "collect")) == 1, "the first body")
        whole = chord(header(3, 5 + 3 - 1), project.collect.s()).apply_async()  # all but the last done first
        assert whole.get(timeout=60) == sum(i * i for i in range(3))
        worker.wait_for(lambda ev: len(of(ev, "collect")) == 2, "the second body")
        events = stopped(worker)
    finally:
        worker.kill()
        app.close()
    assert of(events, "collect") == [["collect", [i * i for i in range(5)]], ["collect", [i * i for i in range(3)]]]
