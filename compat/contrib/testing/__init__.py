"""``celery.contrib.testing``: a test app (`app.TestApp`) and a worker in a thread (`worker.start_worker`)."""
