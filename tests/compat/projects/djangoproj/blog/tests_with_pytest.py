"""pytest-style tests: pytest-django's database access beside jobbridge's own fixtures."""

import pytest

from .jobs import CountWords
from .models import Post


@pytest.mark.django_db
def test_count_words_runs_on_a_memory_bridge(jobbridge_memory):
    jobbridge_memory.register(CountWords)
    post = Post.objects.create(title='t', body='a b c d')
    jobbridge_memory.dispatch(CountWords(post.pk))
    assert jobbridge_memory.run_pending(['words']).succeeded == 1
    post.refresh_from_db()
    assert post.word_count == 4


@pytest.mark.django_db
def test_a_dispatch_is_recorded_by_the_queue_fake(queue_fake):
    queue_fake.register(CountWords)
    post = Post.objects.create(title='t', body='x')
    queue_fake.dispatch(CountWords(post.pk))
    queue_fake.assert_pushed(CountWords)
