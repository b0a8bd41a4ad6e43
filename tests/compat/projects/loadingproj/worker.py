import os

from compat_events import record
from jobbridge.compat import Celery

celery = Celery(__name__, task_default_queue="worker")
celery.conf.broker_url = os.environ.get("CELERY_BROKER_URL")


@celery.task(name="loadingproj.worker.which")
def which():
    record("which", "loadingproj.worker:celery")
