import os

from compat_events import connect_receivers
from jobbridge.compat import Celery, signals

# Set the default Django settings module for the 'celery' program.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djangoproj.settings")

app = Celery("djangoproj")

# Using a string here means the worker doesn't have to serialize the configuration object to child
# processes. namespace='CELERY' means all celery-related configuration keys should have a `CELERY_` prefix.
app.config_from_object("djangoproj.settings", namespace="CELERY")


def installed_apps() -> list[str]:
    from djangoproj import settings

    return settings.INSTALLED_APPS


# Load task modules from all registered Django apps.
app.autodiscover_tasks(installed_apps)

_receivers = connect_receivers(signals, "djangoproj")


@app.task(bind=True, ignore_result=True)
def debug_task(self):
    print(f"Request: {self.request!r}")
