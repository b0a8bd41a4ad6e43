from django.db import connection
from jobbridge.compat import shared_task

from .models import Post


@shared_task
def publish(post_id):
    """Publish a post: counted and marked published through the ORM."""
    post = Post.objects.get(pk=post_id)
    post.published = True
    post.word_count = len(post.body.split())
    post.save(update_fields=['published', 'word_count'])
    return post.word_count


@shared_task
def published_titles():
    return list(Post.objects.filter(published=True).order_by('pk').values_list('title', flat=True))


@shared_task
def database_session():
    """The server process behind this thread's connection (PostgreSQL), which tests end from outside."""
    with connection.cursor() as cursor:
        cursor.execute('SELECT pg_backend_pid()')
        return cursor.fetchone()[0]
