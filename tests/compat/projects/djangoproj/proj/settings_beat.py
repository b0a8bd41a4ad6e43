"""The project with django-celery-beat installed: periodic tasks in its tables, edited in the admin.

jobbridge's schedulers read them there (jobbridge.integrations.django_beat).
settings_beat_scheduler.py also names its scheduler, as cookiecutter-django does.
"""

from .settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, 'django_celery_beat']  # noqa: F405
