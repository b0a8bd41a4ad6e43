"""A Celery app using the canvas: a chord over many header tasks, its errback, and long tasks to revoke."""

import os
import time

from compat_events import record
from jobbridge.compat import Celery, signals

app = Celery("chordproj", broker=os.environ.get("CELERY_BROKER_URL", "redis://localhost:6379/0"),
             backend=os.environ.get("CELERY_RESULT_BACKEND", "redis://localhost:6379/0"))


@app.task
def square(i, fail_at=-1, pause=0.0):
    record("square", i)
    time.sleep(pause)
    if i == fail_at:
        raise ValueError(f"square {i} failed")
    return i * i


@app.task
def collect(values):
    record("collect", values)
    return sum(values)


@app.task
def chord_failed(task_id):
    """An errback in Celery's old style: it gets the id of the task (here: the chord) that failed."""
    record("chord_failed", task_id)


@app.task
def mark(n):
    record("mark", n)
    return n


@app.task
def sleeper(seconds):
    record("sleeper_started")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)
    record("sleeper_finished")


@signals.task_revoked.connect
def revoked(sender=None, request=None, terminated=None, **kwargs):
    record("task_revoked", request.id, terminated)
