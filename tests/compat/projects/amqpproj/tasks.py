from jobbridge.compat import shared_task

from .celery import app


@shared_task
def add(x, y):
    return x + y


@app.task(bind=True)
def encode(self, video):
    return {"video": video, "queue": self.request.delivery_info["routing_key"]}


@app.task(bind=True, time_limit=60)
def monthly(self, month):
    return {"month": month, "queue": self.request.delivery_info["routing_key"]}
