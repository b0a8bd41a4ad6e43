"""install_as_celery(): unmodified ``from celery import ...`` modules run on the facade."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent("""
    from jobbridge.compat import install_as_celery
    install_as_celery()

    from celery import Celery, shared_task, Task, current_app
    from celery.app.task import Task as AppTask
    from celery.exceptions import Retry, MaxRetriesExceededError, SoftTimeLimitExceeded
    from celery.result import AsyncResult, EagerResult
    from celery.schedules import crontab
    from celery.signals import task_prerun, worker_ready
    from celery.utils.log import get_task_logger
    import celery.states as states
    import jobbridge.compat as compat

    assert Celery is compat.Celery and Task is AppTask is compat.Task and Retry is compat.Retry
    assert task_prerun is compat.signals.task_prerun and states.SUCCESS == "SUCCESS"
    logger = get_task_logger(__name__)
    app = Celery("unmodified", broker="memory://", task_always_eager=True)

    @shared_task(bind=True)
    def add(self, x, y):
        logger.info("adding")
        return x + y

    assert add.delay(2, 3).get() == 5
    install_as_celery()  # a second call is a no-op
    print("ok")
""")

REFUSED = textwrap.dedent("""
    import sys, types
    sys.modules["celery"] = types.ModuleType("celery")  # stands for the real Celery, already imported
    from jobbridge.compat import install_as_celery, ImproperlyConfigured
    try:
        install_as_celery()
    except ImproperlyConfigured as exc:
        print("refused:", exc)
""")


def run(program: str) -> str:
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_unmodified_celery_imports_resolve_to_the_facade() -> None:
    assert run(PROGRAM).strip() == "ok"


def test_it_is_refused_when_the_real_celery_is_imported() -> None:
    out = run(REFUSED)
    assert out.startswith("refused:") and "already imported" in out
