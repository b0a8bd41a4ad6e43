from compat_events import count, record
from jobbridge.compat import shared_task


@shared_task(bind=True, autoretry_for=(ConnectionError,), retry_backoff=True, retry_backoff_max=2,
             retry_jitter=False, max_retries=3)
def fetch_feed(self, url):
    record("fetch_feed", url, self.request.retries)
    if count("fetch_feed") <= 2:
        raise ConnectionError(f"{url} is unreachable")
    return f"fetched {url}"


@shared_task
def publish_post(post_id):
    record("publish_post", post_id)


@shared_task
def rebuild_index():
    raise ValueError("the index is corrupt")
