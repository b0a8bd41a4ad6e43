"""Tasks written as Celery's integration suite writes them, for the differences real code found (issue 14)."""

import os

from compat_events import record
from jobbridge.compat import Celery, group
from jobbridge.compat.exceptions import Reject

app = Celery("diffproj", broker=os.environ.get("CELERY_BROKER_URL", "redis://localhost:6379/0"),
             backend=os.environ.get("CELERY_RESULT_BACKEND", "redis://localhost:6379/0"))


@app.task
def add(x, y):
    record("add", x, y)
    return x + y


@app.task
def fail(*args):
    raise ValueError(f"fail {list(args)}")


@app.task
def reject_it():
    raise Reject("no thanks", requeue=False)


@app.task
def errback_id(task_id):
    """An errback in Celery's old style: it gets the failed task's id."""
    record("errback", task_id)


@app.task
def collect(values):
    record("collect", values)
    return values


@app.task(bind=True)
def replace_with_group(self, n):
    return self.replace(group(add.s(i, i) for i in range(n)))


@app.task(soft_time_limit=10, time_limit=5)
def odd_limits():
    """Celery accepts this definition, and refuses to send it (the soft limit is past the hard one)."""
    return "ran"
