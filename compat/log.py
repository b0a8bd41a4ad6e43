"""``celery.utils.log``: task loggers are standard loggers under ``celery.task``."""

from __future__ import annotations

import logging


def get_task_logger(name: str) -> logging.Logger:
    """A logger for a task module; its records also reach handlers on ``celery.task``, as in Celery."""
    if name in ("celery", "celery.task"):
        raise RuntimeError(f"logger name {name!r} is reserved; use the module's __name__")
    logger = logging.getLogger(name)
    if logger.parent is logging.getLogger() and not name.startswith("celery."):
        logger.parent = logging.getLogger("celery.task")
    return logger


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)


task_logger = logging.getLogger("celery.task")
worker_logger = logging.getLogger("celery.worker")
