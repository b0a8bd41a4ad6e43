"""The project's task: records which entry's tick it ran for (the tick is a header of the message)."""

from compat_events import record
from jobbridge.compat import shared_task


@shared_task(bind=True)
def tick(self, what):
    record("tick", what, (self.request.headers or {}).get("jobbridge.tick"), self.request.id)
    return what
