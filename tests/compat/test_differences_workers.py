"""What real Celery code found different, checked against one real ``jobbridge worker -A diffproj`` process.

Each expectation is what a real Celery 5.7 worker (on Redis) was seen to do with the same
tasks: a chain whose middle step fails stores that failure under every later step, so
``get()`` on the chain raises it; ``Reject(requeue=False)`` is stored as a FAILURE holding
the ``Reject``, with no traceback; ``apply_async(ignore_result=True)`` stores nothing and
its ``get()`` is None at once; ``self.replace(group)`` gives the group's results.
One worker (one thread, so the tasks run in the order sent) serves the whole module.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobbridge.compat import AsyncResult, chain, chord, group, states
from jobbridge.compat.exceptions import ChordError, Reject

from .projects import Worker, load, of, start, use

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    from tests.services import ensure_redis

    url = ensure_redis()
    prefix = f"compat-diff-{uuid.uuid4().hex[:8]}:"
    yield {"CELERY_BROKER_URL": url, "CELERY_RESULT_BACKEND": url, "JOBBRIDGE_REDIS_PREFIX": prefix}
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(autouse=True)
def _environment(_clean_environment: None, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="module")
def worker(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Worker]]:
    project = load("diffproj")
    app = use(project.app)
    found = start(Path(tmp_path_factory.mktemp("diffproj")), "diffproj", env, "-c", "1")
    try:
        yield project, found
    finally:
        found.kill()
        app.close()


def test_a_chain_whose_middle_step_fails_raises_that_failure(worker: tuple[Any, Worker]) -> None:
    project, proc = worker
    result = chain(project.add.s(1, 1), project.fail.s(), project.add.s(5)).on_error(
        project.errback_id.s()).apply_async()
    with pytest.raises(ValueError, match=r"fail \[2\]"):
        result.get(timeout=30)
    failed = result.parent
    alone = AsyncResult(result.id, app=project.app)  # by its id alone, with no parent to follow
    assert alone.state == states.FAILURE and isinstance(alone.result, ValueError)
    assert alone.traceback == failed.traceback and "ValueError: fail [2]" in str(alone.traceback)
    with pytest.raises(ValueError, match=r"fail \[2\]"):
        alone.get(timeout=5)
    events = proc.wait_for(lambda ev: of(ev, "errback"), "the chain's errback")
    assert of(events, "errback") == [["errback", failed.id]]
    assert ["add", 2, 5] not in of(events, "add")


def test_every_step_after_a_failure_is_failed_and_a_chord_step_too(worker: tuple[Any, Worker]) -> None:
    project, _ = worker
    long = chain(project.fail.s(1), project.add.s(5), project.add.s(6), project.add.s(7)).apply_async()
    with pytest.raises(ValueError):  # the last step's own record: the worker writes it after every earlier one
        long.get(timeout=30, follow_parents=False)
    node = long
    while node is not None:
        assert AsyncResult(node.id, app=project.app).state == states.FAILURE
        node = node.parent
    into_chord = chain(project.fail.s(1), group(project.add.s(1), project.add.s(2)), project.collect.s()).apply_async()
    with pytest.raises(ValueError, match=r"fail \[1\]"):
        AsyncResult(into_chord.id, app=project.app).get(timeout=30)


def test_a_failed_chord_fails_the_steps_after_it(worker: tuple[Any, Worker]) -> None:
    project, _ = worker
    result = chain(chord([project.fail.s(1), project.add.s(1, 1)], project.collect.s()),
                   project.add.s(5)).apply_async()
    with pytest.raises(ChordError, match=r"raised ValueError\('fail \[1\]'\)"):
        AsyncResult(result.id, app=project.app).get(timeout=30)


def test_reject_without_requeue_is_stored_as_celery_stores_it(worker: tuple[Any, Worker]) -> None:
    project, _ = worker
    result = project.reject_it.delay()
    with pytest.raises(Reject) as raised:
        result.get(timeout=30)
    assert raised.value.args == ("no thanks", False) and raised.value.requeue is False
    assert repr(raised.value) == "reject requeue=False: no thanks"
    assert result.state == states.FAILURE and isinstance(result.result, Reject) and result.traceback is None


def test_ignore_result_on_the_call_is_honoured(worker: tuple[Any, Worker]) -> None:
    project, proc = worker
    ignored = project.add.apply_async((20, 1), ignore_result=True)
    assert ignored.ignored is True and ignored.get(timeout=10) is None
    kept = project.add.apply_async((20, 2), ignore_result=False)
    assert kept.ignored is False and kept.get(timeout=30) == 22  # one worker thread: the first ran before
    assert ["add", 20, 1] in of(proc.events(), "add")
    again = AsyncResult(ignored.id, app=project.app)
    assert again.state == states.PENDING and again.result is None
    sent = project.app.send_task(project.add.name, (20, 3), ignore_result=True)  # send_task's option, as Celery's
    assert sent.ignored is True and sent.get(timeout=10) is None
    assert project.add.apply_async((20, 4)).get(timeout=30) == 24  # one thread: (20, 3) ran before it
    assert ["add", 20, 3] in of(proc.events(), "add")
    assert AsyncResult(sent.id, app=project.app).state == states.PENDING


def test_replace_with_a_group_gives_the_groups_results(worker: tuple[Any, Worker]) -> None:
    project, _ = worker
    assert project.replace_with_group.delay(3).get(timeout=30) == [0, 2, 4]
