"""An app with Celery's event settings on, as cookiecutter-django sets them for Flower (test_events_settings.py)."""

from jobbridge.compat import Celery

app = Celery("eventsproj", worker_send_task_events=True, task_send_sent_event=True, event_queue_expires=60.0,
             task_default_queue="events")


@app.task(name="eventsproj.ping")
def ping():
    return "pong"
