"""The project's Celery app, as a Celery project writes it (only the import line differs).

Run by the tests as ``jobbridge worker -A beatproj -B`` and as ``jobbridge beat -A beatproj``
beside a plain worker.
"""

from datetime import timedelta

from compat_events import record
from jobbridge.compat import Celery
from jobbridge.compat.schedules import crontab

app = Celery("beatproj", include=["beatproj.tasks"])
app.conf.beat_schedule = {
    "every-second": {"task": "beatproj.tasks.tick", "schedule": timedelta(seconds=1), "args": ("interval",)},
    "every-minute": {"task": "beatproj.tasks.tick", "schedule": crontab(minute="*"), "args": ("cron",),
                     "options": {"expires": 50}},
}


@app.on_after_configure.connect
def setup_periodic_tasks(sender, **kwargs):
    from beatproj.tasks import tick

    sender.add_periodic_task(2.0, tick.s("periodic"), name="every-two-seconds")


@app.on_after_configure.connect
def announce(sender, **kwargs):
    record("configured", sender.main)
