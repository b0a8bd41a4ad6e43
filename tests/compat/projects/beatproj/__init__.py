"""A Celery-style project with periodic tasks: beat_schedule (an interval and a crontab) and add_periodic_task."""
