import os

from compat_events import record
from jobbridge.compat import Celery


class Flask:
    """Stands for the Flask app the example makes first: callable, and no app of ours."""

    def __call__(self, environ, start_response):
        return []


flask_app = Flask()
celery_app = Celery("make_celery", broker=os.environ.get("CELERY_BROKER_URL"), task_default_queue="flask")


@celery_app.task(name="loadingproj.make_celery.which")
def which():
    record("which", "loadingproj.make_celery:celery_app")
