"""``app.control``: revoking tasks, durably, and ping from the heartbeats; the rest of remote control is refused.

``app.control.revoke(id_or_ids, terminate=False)`` is ``bridge.cancel``: the ids are
written to the result store, which every worker reads before it runs a task (and
while it runs one), so a task that has not started never runs — on any worker,
one that was offline at the time included, after a restart too — and a running
one is stopped when ``terminate=True``, as its time limit would stop it. It ends
REVOKED either way and is not retried. The ``signal`` changes nothing: the
attempt is stopped the one way jobbridge stops an attempt (docs/compat.md).
Revokes are kept for ``result_expires``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..exceptions import RefusedFeature, ResultsNotEnabled
from ..ports import AppPort
from . import liveness

_NO_REMOTE = ("jobbridge has no remote control: workers take no broadcast commands (rate_limit, "
              "add_consumer, shutdown, ...). Watch workers with jobbridge status; stop one with SIGTERM; revoke "
              "tasks with app.control.revoke(id); ping() and inspect().ping() are answered from the workers' "
              "heartbeats")


class Control:
    """Celery's ``app.control``, as far as jobbridge provides it: ``revoke`` and ``terminate``."""

    def __init__(self, app: AppPort) -> None:
        self.app = app

    def revoke(self, task_id: str | Sequence[str], destination: Any = None, terminate: bool = False,
               signal: Any = None, **kwargs: Any) -> None:
        """Cancel tasks by id, durably; ``terminate=True`` also stops them if they are running."""
        if destination is not None:
            raise RefusedFeature("revoke(destination=...) is refused: a revoke is kept in the result store, "
                                 "where every worker sees it; it cannot be aimed at one worker")
        ids = [task_id] if isinstance(task_id, str) else [str(i) for i in task_id]
        bridge = self.app.jobbridge_app()
        if bridge.results is None:
            raise ResultsNotEnabled(
                f"revoke() keeps revokes in a store every worker reads, and this app has none: its broker's "
                f"{bridge.settings.connection().driver} driver keeps no results. Set result_backend to a redis:// "
                "or db+<database URL> store")
        if ids:
            bridge.cancel(ids, terminate=bool(terminate))

    def terminate(self, task_id: str | Sequence[str], destination: Any = None, signal: Any = None,
                  **kwargs: Any) -> None:
        """``revoke(task_id, terminate=True)``."""
        self.revoke(task_id, destination=destination, terminate=True, signal=signal)

    def ping(self, destination: Sequence[str] | None = None, timeout: float = 1.0,
             **kwargs: Any) -> list[dict[str, dict[str, str]]]:
        """The live workers, from their heartbeats (compat/results/liveness.py): ``[{name: {"ok": "pong"}}]``."""
        return liveness.ping(self.app, destination)

    def inspect(self, destination: Sequence[str] | None = None, timeout: float = 1.0,
                **kwargs: Any) -> liveness.Inspect:
        """``ping()`` from the heartbeats; the other inspections are refused, naming what to use."""
        return liveness.Inspect(self.app, destination, timeout)

    def revoke_by_stamped_headers(self, *args: Any, **kwargs: Any) -> None:
        raise RefusedFeature("revoke_by_stamped_headers() is refused: stamping is not provided; revoke by "
                             "task id")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise RefusedFeature(f"app.control.{name} is not available on jobbridge: {_NO_REMOTE}")


__all__ = ["Control"]
