"""``app.control.ping()`` and ``app.control.inspect().ping()``: which workers are alive, from their heartbeats.

Celery's ping is a broadcast that each worker answers with ``{"ok": "pong"}``.
jobbridge workers take no broadcast commands, but every worker process (and the
test worker thread of `start_worker`) writes a heartbeat into its store's worker
registry every few seconds, which is what ``jobbridge workers`` and ``jobbridge
ping`` read. The answer here is read from that registry: one ``{"ok": "pong"}``
for each worker whose last beat is recent (``jobbridge.drivers.worker_registry_port``:
``STALE_AFTER``), keyed by its name (``-n``, ``celery@host`` style), in Celery's
shapes: a list of ``{name: reply}`` for ``control.ping()``, a dict ``{name: reply}``
(``None`` when no worker answers) for ``inspect().ping()``. A store that keeps no
registry (the memory driver) has no workers to list, so nobody answers.
The rest of ``inspect()`` (``active``, ``reserved``, ``stats``, ...) is refused,
naming ``jobbridge status`` and ``jobbridge workers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobbridge.drivers.worker_registry_port import live
from jobbridge.worker_monitor import registry_for

from ..exceptions import RefusedFeature
from ..ports import AppPort

PONG = {"ok": "pong"}


def live_names(app: AppPort, destination: Sequence[str] | None = None) -> list[str]:
    """The names of the workers alive on the app's store (those in ``destination`` when given)."""
    registry = registry_for(app.jobbridge_app(), create=True)
    if registry is None:
        return []
    names = sorted({beat.name for beat in live(registry.list(), registry.now())})
    return [name for name in names if destination is None or name in destination]


def ping(app: AppPort, destination: Sequence[str] | None = None) -> list[dict[str, dict[str, str]]]:
    """``control.ping()``: ``[{name: {"ok": "pong"}}, ...]`` for each live worker."""
    return [{name: dict(PONG)} for name in live_names(app, destination)]


class Inspect:
    """``app.control.inspect()``: ``ping()`` from the heartbeats; every other inspection is refused."""

    def __init__(self, app: AppPort, destination: Sequence[str] | None = None, timeout: float = 1.0,
                 **kwargs: Any) -> None:
        self.app, self.destination, self.timeout = app, destination, timeout

    def ping(self, destination: Sequence[str] | None = None) -> dict[str, dict[str, str]] | None:
        found = {name: dict(PONG) for name in live_names(self.app, destination or self.destination)}
        return found or None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise RefusedFeature(f"app.control.inspect().{name}() is not available on jobbridge: workers take no "
                             "broadcast commands; ping() is answered from the workers' heartbeats. See what "
                             "runs and waits with jobbridge status, and the workers with jobbridge workers")


__all__ = ["PONG", "Inspect", "live_names", "ping"]
