"""``celery.contrib.testing.tasks``: ``celery.ping``, the task a starting test worker answers to prove it runs."""

from __future__ import annotations

from ...shared import shared_task


def pong() -> str:
    """Answer ``"pong"``: `start_worker` sends ``celery.ping`` and waits for it before the test goes on."""
    return "pong"


ping = shared_task(name="celery.ping")(pong)

__all__ = ["ping"]
