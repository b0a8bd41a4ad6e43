"""The project's settings with a Celery setting jobbridge refuses (tests/compat/test_lazy_config.py).

Every manage.py command must still run, migrate included: the refusal comes when the app is
first used for work (the worker's start, the first dispatch), with its reason.
"""

from .settings import *  # noqa: F403

CELERY_TASK_DEFAULT_PRIORITY = 5
