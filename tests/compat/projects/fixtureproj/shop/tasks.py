"""Task modules as they are written for Celery: shared tasks, a remote-control command, an abortable task."""

import time

from celery import shared_task
from celery.contrib.abortable import AbortableTask
from celery.utils.log import get_task_logger
from celery.worker.control import control_command

logger = get_task_logger(__name__)


@shared_task
def total(prices):
    logger.info("adding %d prices", len(prices))
    return sum(prices)


@shared_task
def refuse(order_id):
    raise ValueError(f"order {order_id} is closed")


@shared_task(bind=True, base=AbortableTask)
def crunch(self, rounds):
    for done in range(rounds):
        if self.is_aborted():
            return f"aborted after {done}"
        self.update_state(state="PROGRESS", meta={"done": done})
        time.sleep(0.02)
    return "finished"


@control_command()
def flush_cache(state):
    return {"ok": "flushed"}
