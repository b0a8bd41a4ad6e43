import os
import time

from compat_events import connect_receivers, record
from jobbridge.compat import Celery, signals

celery = Celery(__name__)
celery.conf.broker_url = os.environ.get("CELERY_BROKER_URL", "redis://localhost:6379")
celery.conf.result_backend = os.environ.get("CELERY_RESULT_BACKEND", "redis://localhost:6379")
_receivers = connect_receivers(signals, "fastapiproj")


@celery.task(name="create_task")
def create_task(task_type):
    time.sleep(int(task_type) * 0.01)
    record("create_task", task_type)
    return True
