"""A Django project's settings module (Django itself is not needed: the facade reads the CELERY_ names)."""

import os

from kombu import Queue

DEBUG = False
SECRET_KEY = "django-insecure-sample"
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "djangoproj.blog",
    "djangoproj.accounts",
    "djangoproj.pages",  # an app without a tasks module
]
TIME_ZONE = "Europe/Paris"
USE_TZ = True

DATABASE_URL = os.environ.get("DATABASE_URL", "sqlite:///db.sqlite3")

# Celery: read by app.config_from_object("...settings", namespace="CELERY")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "redis://localhost:6379/0")
# was "django-db" (django-celery-results): results now go to the jobbridge_results table of the same database
CELERY_RESULT_BACKEND = "db+" + DATABASE_URL
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_TRACK_STARTED = True
CELERY_TASK_TIME_LIMIT = 30 * 60
CELERY_TASK_QUEUES = (Queue("celery"), Queue("mail"))
CELERY_TASK_ROUTES = {"djangoproj.accounts.tasks.*": {"queue": "mail"}}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
