"""The project as cookiecutter-django makes it: django-celery-beat installed and its scheduler named."""

from .settings_beat import *  # noqa: F403

CELERY_BEAT_SCHEDULER = 'django_celery_beat.schedulers:DatabaseScheduler'
