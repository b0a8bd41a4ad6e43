"""Apps found by ``-A`` as Celery's ``-A`` finds them (tests/compat/test_app_loading.py).

- ``-A loadingproj.worker.celery``: module ``loadingproj.worker``, attribute ``celery`` (the FastAPI example);
- ``-A loadingproj.make_celery``: the app is ``celery_app``, a name no convention tries (the Flask example);
- ``-A loadingproj.deployed``: code naming a developer's URLs, pointed elsewhere by the environment
  (tests/compat/test_env_overrides.py).
"""
