"""Celery's own ``examples/`` (from its sdist), unchanged, on real ``jobbridge worker -A`` processes.

Each example is copied from the downloaded sdist (tests/compat/celery_source.py) into
the test's temporary directory and run as its README (or module docstring) says,
with ``celery -A`` spelled ``jobbridge worker -A`` and ``celery beat`` spelled
``jobbridge beat``. The only change is the shim's ``sitecustomize``
(``install_as_celery()``); the code's ``amqp://`` broker and ``rpc://`` backend are
pointed at Redis (db 12, a key prefix per test) or SQLite through
``CELERY_BROKER_URL`` / ``CELERY_RESULT_BACKEND``, as a deployment points Celery.

What the examples' texts say that these tests do not follow, and why:
``python myapp.py worker`` (``app.start()``) is refused by the facade (use
``jobbridge worker -A myapp``); the Django README's ``res = add.delay_on_commit(2, 3);
res.get()`` fails on Celery too, whose ``delay_on_commit`` returns None — the test
asserts that None and finds the task's run in the worker's log instead; the Next Steps
guide's ``xsum.map([range(10), range(100)])`` sends ``range`` objects, which Celery's
json serializer cannot send either — the test sends the same numbers as lists.

Run: ``.venv/bin/pytest tests/compat/test_celery_examples.py -q``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.compat.celery_source import copy_example, jobbridge_command, shim_env
from tests.services import ensure_redis

pytestmark = pytest.mark.slow
DEADLINE = 60.0


class Process:
    """A command run in an example's directory, its output in a log file."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        out: IO[bytes] = log.open("wb")
        self.proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, times: int = 1, seconds: float = DEADLINE) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = self.output()
            if found.count(text) >= times:
                return found
            if self.proc.poll() is not None:
                raise AssertionError(f"exited ({self.proc.returncode}) before {text!r} x{times}:\n{found}")
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {text!r} x{times}:\n{self.output()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()


@pytest.fixture
def redis_env() -> Iterator[dict[str, str]]:
    """Broker and backend on Redis db 12 under a prefix of this test's own, deleted afterwards."""
    import redis

    url = ensure_redis().rsplit("/", 1)[0] + "/12"
    prefix = f"celery-examples-{uuid.uuid4().hex[:8]}:"
    yield {"CELERY_BROKER_URL": url, "CELERY_RESULT_BACKEND": url, "JOBBRIDGE_REDIS_PREFIX": prefix}
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    client.close()


def start(processes: list[Process], where: Path, env: dict[str, str], name: str, *args: str) -> Process:
    process = Process([*jobbridge_command(), *args], where, env, where.parent / f"{name}.log")
    processes.append(process)
    return process


def client(where: Path, env: dict[str, str], code: str, *, manage: bool = False) -> object:
    """Run ``code`` as the README's Python shell would (``manage.py shell`` for Django): its printed JSON."""
    args = [sys.executable, "manage.py", "shell", "-c", code] if manage else [sys.executable, "-c", code]
    done = subprocess.run(args, cwd=where, env=env, capture_output=True, text=True, timeout=DEADLINE + 30)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


NEXT_STEPS = """
import json
from celery import chain, chord, group
from proj.tasks import add, mul, xsum
res = add.delay(2, 2)
print(json.dumps({
    "add": res.get(timeout=30), "state": res.state, "mul": mul.delay(3, 4).get(timeout=30),
    "xsum": xsum.delay([1, 2, 3]).get(timeout=30),
    "apply_async": add.apply_async((2, 2), countdown=1).get(timeout=30),
    "group": group(add.s(i, i) for i in range(10))().get(timeout=30),
    "chain": chain(add.s(4, 4) | mul.s(8))().get(timeout=30),
    "partial": (add.s(2) | mul.s(8))(4).get(timeout=30),
    "chord": chord((add.s(i, i) for i in range(10)), xsum.s())().get(timeout=30),
    "map": xsum.map([list(range(10)), list(range(100))]).apply_async().get(timeout=30),
}))
"""


def test_next_steps_proj(tmp_path: Path, redis_env: dict[str, str], processes: list[Process]) -> None:
    """``celery -A proj worker -l INFO``, then the Next Steps guide's calls and canvas on ``proj.tasks``."""
    where = copy_example("next-steps", tmp_path)
    env = shim_env(**redis_env)
    start(processes, where, env, "worker", "worker", "-A", "proj", "-l", "INFO").wait_for("jobs ")
    assert client(where, env, NEXT_STEPS) == {
        "add": 4, "state": "SUCCESS", "mul": 12, "xsum": 6, "apply_async": 4,
        "group": [0, 2, 4, 6, 8, 10, 12, 14, 16, 18], "chain": 64, "partial": 48, "chord": 90,
        "map": [45, 4950],
    }


def test_app_example_both_spellings(tmp_path: Path, redis_env: dict[str, str], processes: list[Process]) -> None:
    """``celery -A myapp worker -l INFO`` and ``celery -A myapp:app worker -l INFO``, then ``add.delay(16, 16).get()``.

    Each spelling gets a worker (and a key prefix) of its own, so each answer is its
    worker's; the example's ``add`` sleeps 10 s, so the two run side by side.
    """
    where = copy_example("app", tmp_path)
    envs = {spec: shim_env(**{**redis_env, "JOBBRIDGE_REDIS_PREFIX": f"{redis_env['JOBBRIDGE_REDIS_PREFIX']}{n}:"})
            for n, spec in enumerate(("myapp", "myapp:app"))}
    workers = {spec: start(processes, where, env, f"worker{n}", "worker", "-A", spec, "-l", "INFO")
               for n, (spec, env) in enumerate(envs.items())}
    for worker in workers.values():
        worker.wait_for("jobs ")
    calls = {spec: subprocess.Popen([sys.executable, "-c", "import json; from myapp import add; "
                                     "print(json.dumps(add.delay(16, 16).get(timeout=40)))"],
                                    cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for spec, env in envs.items()}
    for spec, call in calls.items():
        out, err = call.communicate(timeout=DEADLINE)
        assert call.returncode == 0 and json.loads(out) == 32, f"-A {spec}: {out}\n{err}"
        assert "name=myapp.add" in workers[spec].wait_for("outcome=succeeded"), spec


def test_periodic_tasks_worker_and_beat(tmp_path: Path, redis_env: dict[str, str],
                                        processes: list[Process]) -> None:
    """``celery -A myapp worker -l INFO`` beside ``celery -A myapp beat``: ``say('hello')`` every 10 s.

    The example adds its entry with ``add_periodic_task`` from ``on_after_configure``;
    two runs by the worker show the entry fires on its interval, not once.
    """
    where = copy_example("periodic-tasks", tmp_path)
    env = shim_env(**redis_env)
    worker = start(processes, where, env, "worker", "worker", "-A", "myapp", "-l", "INFO")
    beat = start(processes, where, env, "beat", "beat", "-A", "myapp", "-l", "INFO")
    ran = worker.wait_for("name=myapp.say", times=2, seconds=DEADLINE)
    assert ran.count("hello") >= 2 and "outcome=failed" not in ran
    assert "add every 10" in beat.output()


DJANGO_SHELL = """
import json
from django.db import transaction
from demoapp.models import Widget
from demoapp.tasks import add, count_widgets, mul, rename_widget, xsum
from proj.celery import debug_task
with transaction.atomic():
    on_commit = add.delay_on_commit(2, 3)
widget = Widget.objects.create(name="first")
renamed = rename_widget.delay(widget.id, "renamed").get(timeout=30)
widget.refresh_from_db()
print(json.dumps({
    "delay_on_commit": on_commit, "add": add.delay(2, 3).get(timeout=30), "mul": mul.delay(2, 3).get(timeout=30),
    "xsum": xsum.delay([1, 2, 3]).get(timeout=30), "count": count_widgets.delay().get(timeout=30),
    "renamed": [renamed, widget.name], "debug_task": debug_task.delay().get(timeout=30),
}))
"""


def test_django_example(tmp_path: Path, processes: list[Process]) -> None:
    """``celery -A proj worker -l INFO`` in the Django project, then its README's tasks from ``manage.py shell``.

    The broker is SQLite through ``CELERY_BROKER_URL``; the results go where the
    settings put them (``CELERY_RESULT_BACKEND = 'db+sqlite:///results.sqlite'``).
    """
    where = copy_example("django", tmp_path)
    env = shim_env(CELERY_BROKER_URL=f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}")
    migrated = subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=where, env=env,
                              capture_output=True, text=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    worker = start(processes, where, env, "worker", "worker", "-A", "proj", "-l", "INFO")
    worker.wait_for("jobs ")
    assert client(where, env, DJANGO_SHELL, manage=True) == {
        "delay_on_commit": None, "add": 5, "mul": 6, "xsum": 6, "count": 1, "renamed": [None, "renamed"],
        "debug_task": None,  # the task says ignore_result=True: nothing is kept, get() is None at once
    }
    ran = worker.wait_for("name=demoapp.tasks.add", times=2)  # the on_commit call ran too
    assert "Request: <Context:" in worker.wait_for("name=proj.celery.debug_task")
    assert "outcome=failed" not in ran
