import time

from . import celery


@celery.task(bind=True, ignore_result=False)
def build_report(self, rows):
    """A long task reporting its progress, the way Flask + Celery tutorials show it."""
    for done in range(1, rows + 1):
        time.sleep(0.05)
        self.update_state(state="PROGRESS", meta={"done": done, "total": rows})
    return {"rows": rows, "url": f"/reports/{self.request.id}.csv"}
