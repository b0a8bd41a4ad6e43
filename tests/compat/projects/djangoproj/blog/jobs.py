"""A jobbridge job beside the Celery tasks: the same ORM, the same database, run by `jobbridge worker -A blog.jobs`."""

from jobbridge import JobBridge, JobContext, job

from .models import Post


@job('blog.count-words', queue='words')
class CountWords:
    post_id: int

    def handle(self, ctx: JobContext) -> None:
        post = Post.objects.get(pk=self.post_id)
        post.word_count = len(post.body.split())
        post.save(update_fields=['word_count'])


# JOBBRIDGE_DATABASE_URL=django://default: the jobs live in the project's own database
bridge = JobBridge.from_env(jobs=[CountWords])
