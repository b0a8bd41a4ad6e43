from django.db import transaction
from django.test import TestCase

from .models import Post
from .tasks import publish, published_titles


class PublishTests(TestCase):
    """Run with CELERY_TASK_ALWAYS_EAGER=True: tasks run inline, in the test's transaction."""

    def test_publish_counts_the_words_and_marks_the_post(self):
        post = Post.objects.create(title='hello', body='one two three')
        self.assertEqual(publish.delay(post.pk).get(), 3)
        post.refresh_from_db()
        self.assertTrue(post.published)
        self.assertEqual(published_titles.delay().get(), ['hello'])

    def test_the_view_publishes_a_new_post_once_its_transaction_commits(self):
        with self.captureOnCommitCallbacks(execute=True) as callbacks:
            response = self.client.post('/posts/', {'title': 'news', 'body': 'a b'})
        self.assertEqual(response.status_code, 201)
        self.assertEqual(len(callbacks), 1)
        self.assertEqual(Post.objects.get(pk=response.json()['id']).word_count, 2)

    def test_a_rolled_back_post_is_never_published(self):
        with self.captureOnCommitCallbacks(execute=True) as callbacks:
            try:
                with transaction.atomic():
                    post = Post.objects.create(title='draft', body='x')
                    publish.delay_on_commit(post.pk)
                    raise RuntimeError('the form was invalid after all')
            except RuntimeError:
                pass
        self.assertEqual(callbacks, [])
        self.assertFalse(Post.objects.filter(published=True).exists())
