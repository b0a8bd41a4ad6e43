"""An app with ``result_extended = True`` (cookiecutter-django sets it): tests/compat/test_result_extended.py."""

from jobbridge.compat import Celery

app = Celery("extendedproj", result_extended=True, task_default_queue="extended")


@app.task(bind=True, name="extendedproj.flaky", max_retries=3)
def flaky(self, x, y=0):
    """Fails its first attempt, so the stored result says it took one retry."""
    if self.request.retries < 1:
        raise self.retry(countdown=0)
    return x + y
