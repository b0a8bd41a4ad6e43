"""Fixtures for the Celery facade: apps on the memory driver with a fixed clock, and a signal recorder."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobbridge.compat import Celery, signals

from jobbridge.testing import FixedClock

# The projects are real projects, each run by its own tests in a subprocess (a worker, manage.py, or a pytest
# of its own with its own conftest and plugins): never collected as part of this suite.
collect_ignore = ["projects"]

RECORDED = (
    "before_task_publish", "after_task_publish", "task_received", "task_prerun", "task_postrun",
    "task_success", "task_failure", "task_retry", "task_revoked",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No JOBBRIDGE_* or CELERY_* variable and no jobbridge.toml leak into a facade test."""
    import os

    for name in list(os.environ):
        if name.startswith(("JOBBRIDGE_", "CELERY_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The broker and result backend URLs (and Redis key prefix) a test process and its workers share."""
    env: dict[str, str] = {}
    if request.param == "sqlite":
        env["CELERY_BROKER_URL"] = f"sqla+sqlite:///{tmp_path / 'jobs.sqlite3'}"
        env["CELERY_RESULT_BACKEND"] = f"db+sqlite:///{tmp_path / 'jobs.sqlite3'}"
    else:
        from tests.services import ensure_redis

        env["CELERY_BROKER_URL"] = env["CELERY_RESULT_BACKEND"] = ensure_redis()
        env["JOBBRIDGE_REDIS_PREFIX"] = f"compat-{uuid.uuid4().hex[:8]}:"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield env
    if request.param == "redis":
        import redis

        client = redis.Redis.from_url(env["CELERY_BROKER_URL"])
        keys = list(client.scan_iter(match=env["JOBBRIDGE_REDIS_PREFIX"] + "*"))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def make_app(clock: FixedClock) -> Iterator[Callable[..., Celery]]:
    made: list[Celery] = []

    def make(main: str = "proj", **settings: Any) -> Celery:
        settings.setdefault("broker", "memory://")
        app = Celery(main, **settings)
        app.jobbridge_options(clock=clock)
        made.append(app)
        return app

    yield make
    for app in made:
        app.close()


@pytest.fixture
def app(make_app: Callable[..., Celery]) -> Celery:
    return make_app()


class Recorder:
    """Every Celery signal a test cares about, as (name, sender, kwargs) in the order sent."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any, dict[str, Any]]] = []
        self._receivers: list[tuple[signals.Signal, Callable[..., None]]] = []
        for name in RECORDED:
            signal = getattr(signals, name)

            def receiver(sender: Any = None, _name: str = name, **kwargs: Any) -> None:
                kwargs.pop("signal", None)
                self.events.append((_name, sender, kwargs))

            signal.connect(receiver, weak=False)
            self._receivers.append((signal, receiver))

    def names(self) -> list[str]:
        return [name for name, _, _ in self.events]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for found, _, kwargs in self.events if found == name]

    def close(self) -> None:
        for signal, receiver in self._receivers:
            signal.disconnect(receiver)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.close()
