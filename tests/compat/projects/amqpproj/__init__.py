"""A Celery project on RabbitMQ, laid out as Celery's docs lay one out: proj/celery.py and proj/tasks.py."""

from .celery import app as celery_app

__all__ = ("celery_app",)
