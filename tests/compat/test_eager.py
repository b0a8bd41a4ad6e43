"""Eager mode: task_always_eager runs delay() inline (EagerResult), task_eager_propagates raises, apply()."""

from __future__ import annotations

from typing import Any

import pytest
from jobbridge.compat import Celery, EagerResult, Task, chain, chord, group
from jobbridge.compat.exceptions import ChordError

from jobbridge.testing.contract import pending

from .conftest import Recorder


def test_always_eager_runs_delay_inline(make_app: Any, recorder: Recorder) -> None:
    app = make_app(task_always_eager=True)

    @app.task(bind=True)
    def add(self: Task, x: int, y: int) -> int:
        assert self.request.is_eager and not self.request.called_directly
        return x + y

    result = add.delay(2, 2)
    assert isinstance(result, EagerResult)
    assert result.get() == 4 and result.state == "SUCCESS" and result.successful() and result.ready()
    assert pending(app.jobbridge_app().driver(), "celery") == 0
    assert recorder.names() == ["task_prerun", "task_success", "task_postrun"]


def test_eager_failures_are_kept_or_propagated(make_app: Any) -> None:
    app = make_app(CELERY_ALWAYS_EAGER=True)

    @app.task
    def boom() -> None:
        raise KeyError("x")

    result = boom.delay()
    assert result.failed() and result.state == "FAILURE" and isinstance(result.result, KeyError)
    with pytest.raises(KeyError):
        result.get()
    assert result.get(propagate=False).args == ("x",)
    app.conf.task_eager_propagates = True
    with pytest.raises(KeyError):
        boom.delay()



def test_an_eager_chord_gives_a_header_chains_closing_group_as_its_list(make_app: Any) -> None:
    """As a worker does: the member's place holds the group's results, a failure in it fails the chord."""
    app = make_app(task_always_eager=True)

    @app.task
    def identity(x: Any) -> Any:
        return x

    @app.task
    def boom(x: Any) -> None:
        raise KeyError(x)

    deeper = chain(identity.si(5), group(identity.s(), chain(identity.s(), group(identity.s(), identity.s()))))
    assert chord([identity.si(1), deeper], identity.s()).delay().get() == [1, [5, [5, 5]]]
    failed = chord([identity.si(1), chain(identity.si(5), group(identity.s(), boom.s()))], identity.s()).delay()
    assert failed.state == "FAILURE" and isinstance(failed.result, ChordError) and "KeyError(5)" in str(failed.result)

def test_eager_retries_run_at_once_until_max_retries(make_app: Any) -> None:
    app = make_app(task_always_eager=True, task_eager_propagates=True)
    seen: list[int] = []

    @app.task(bind=True, max_retries=2, autoretry_for=(OSError,), retry_backoff=True)
    def flaky(self: Task) -> None:
        seen.append(self.request.retries)
        raise OSError("down")

    with pytest.raises(OSError):
        flaky.delay()
    assert seen == [0, 1, 2]


def test_apply_runs_inline_without_the_setting(app: Celery) -> None:
    @app.task
    def mul(x: int, y: int) -> int:
        return x * y

    result = mul.apply((3, 4))
    assert result.get() == 12 and result.id
    assert pending(app.jobbridge_app().driver(), "celery") == 0
    assert mul.s(2).apply((5,)).get() == 10


def test_send_task_is_not_eager(make_app: Any) -> None:
    app = make_app(task_always_eager=True)
    with pytest.warns(UserWarning, match="ignores task_always_eager"):
        app.send_task("remote.thing")
    assert pending(app.jobbridge_app().driver(), "celery") == 1
