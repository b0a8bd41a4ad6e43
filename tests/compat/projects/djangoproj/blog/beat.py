"""A jobbridge app whose schedulers also fire django-celery-beat's periodic tasks (settings_beat.py).

`jobbridge worker -A blog.beat --schedule` and `jobbridge scheduler -A blog.beat`:
a row's task names a job, its kwargs are the job's fields.
"""

from jobbridge import JobBridge, JobContext, job
from jobbridge.integrations.django_beat import attach
from jobbridge.scheduling.entries import TICK_HEADER

from .models import Post


@job('blog.beat-tick', queue='beat')
class BeatTick:
    label: str

    def handle(self, ctx: JobContext) -> None:
        Post.objects.create(title=f'{self.label}@{ctx.headers[TICK_HEADER]}', body='beat')


bridge = JobBridge.from_env(jobs=[BeatTick])
attach(bridge)
