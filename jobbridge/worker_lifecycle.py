"""The worker's life cycle: four phases, the moves between them, and when a run is over.

::

    RUNNING ──drain──▶ DRAINING ──nothing left to finish──▶ HALTED
       │                  │                                   ▲
       └────stop_now──────┴─────▶ STOPPING ──the loop left────┘

- **running**: reserving and running jobs.
- **draining**: taking no new jobs, finishing and settling the held ones. Entered
  by a first SIGTERM or SIGINT, by `Worker.stop()`, when the job budget is spent
  (``--once`` is a budget of one, ``--max-jobs N`` of N), when the drain
  (``--stop-when-empty``, and ``--once``) finds the queues empty, or when an
  attempt is stuck past its timeout (which also asks for the process to be replaced).
- **stopping**: leaving at once, settling nothing; the held jobs run again once their
  leases lapse. Entered by a second signal or `Worker.stop(now=True)`.
- **halted**: `Worker.run` has returned.

Only these moves are made; any other request is ignored, so that a stop asked for
twice, or from several threads at once (a signal handler, the watchdog, the test
calling `stop`), keeps the first reason and never goes back to an earlier phase.
The first reason is the one the worker announces (``worker_stopping``, once) and logs.
The worker asks this object which phase it is in; it never keeps flags of its own.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable

#: exit status of a process that must be replaced (a stuck attempt); the supervisor starts a fresh one
REPLACE_EXIT_CODE = 3
#: exit status after a second signal stopped the worker without settling
STOPPED_AT_ONCE_EXIT_CODE = 1


class Phase(enum.Enum):
    RUNNING = "running"
    DRAINING = "draining"
    STOPPING = "stopping"
    HALTED = "halted"


#: the legal moves; a request for any other is ignored
MOVES: dict[Phase, frozenset[Phase]] = {
    Phase.RUNNING: frozenset({Phase.DRAINING, Phase.STOPPING, Phase.HALTED}),  # halted: only if the loop raised
    Phase.DRAINING: frozenset({Phase.STOPPING, Phase.HALTED}),
    Phase.STOPPING: frozenset({Phase.HALTED}),
    Phase.HALTED: frozenset(),
}


class Lifecycle:
    """One worker's phase, why it left running, its job budget and the drain; see the module docstring.

    ``wake`` is called on every stop request, so that a loop waiting for work
    looks at its phase again at once.
    """

    def __init__(self, *, wake: Callable[[], None], once: bool = False, max_jobs: int | None = None,
                 stop_when_empty: bool = False) -> None:
        self.phase = Phase.RUNNING
        self.history: list[Phase] = [Phase.RUNNING]
        #: why the worker left running (the first reason asked for), or None while it runs
        self.reason: str | None = None
        #: an attempt got stuck: the process must be replaced once the run is over
        self.replace_process = False
        #: a supervised child does not stop at once on a second signal: its supervisor escalates (SIGKILL)
        self.ignore_second_signal = False
        self.once = once
        #: how many jobs the run may reserve (``--once``: one), or None for no limit
        self.budget = 1 if once else max_jobs
        #: the drain: end the run once the queues have nothing available
        self.drains = once or stop_when_empty
        self.reserved = 0
        self._wake = wake
        self._signals = 0
        self._announced = False
        self._lock = threading.RLock()  # re-entrant: a signal handler may interrupt a move on its own thread

    # -- the phases --------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.phase is Phase.RUNNING

    @property
    def draining(self) -> bool:
        return self.phase is Phase.DRAINING

    @property
    def stopping(self) -> bool:
        return self.phase is Phase.STOPPING

    @property
    def stopped_at_once(self) -> bool:
        """Whether the run was (or is being) left at once, without settling what it held."""
        return Phase.STOPPING in self.history

    @property
    def exit_code(self) -> int:
        """What a worker process should exit with after the run."""
        if self.stopped_at_once:
            return STOPPED_AT_ONCE_EXIT_CODE
        return REPLACE_EXIT_CODE if self.replace_process else 0

    def _move(self, to: Phase, reason: str | None = None) -> bool:
        """Make the move to ``to`` if it is a legal one; the first reason given is kept."""
        with self._lock:
            moved = to in MOVES[self.phase]
            if moved:
                self.phase = to
                self.history.append(to)
            if reason is not None and self.reason is None:
                self.reason = reason
        self._wake()
        return moved

    # -- the requests ------------------------------------------------------------------------

    def drain(self, reason: str) -> None:
        """Take no new jobs; finish and settle the held ones."""
        self._move(Phase.DRAINING, reason)

    def stop_now(self, reason: str) -> None:
        """Leave at once, settling nothing."""
        self._move(Phase.STOPPING, reason)

    def halt(self) -> None:
        """The run is over (from draining or stopping; from running only if the loop itself raised)."""
        self._move(Phase.HALTED)

    def signalled(self, name: str) -> bool:
        """SIGTERM or SIGINT: the first drains, a second stops at once; True when the loop must leave now."""
        self._signals += 1
        if self._signals == 1 or self.ignore_second_signal:
            self.drain(f"received {name}")
            return False
        self.stop_now("asked to stop")
        return True

    def stuck(self, job_id: str) -> None:
        """An attempt outlived its timeout and cannot be interrupted: drain, then replace the process."""
        self.replace_process = True
        self.drain(f"job {job_id} is stuck past its timeout")

    def announcement(self) -> str | None:
        """The reason the worker left running, the first time it is asked after it did (it is announced once)."""
        with self._lock:
            if self._announced or self.running:
                return None
            self._announced = True
            return self.reason

    # -- the exit conditions -----------------------------------------------------------------

    def room(self, wanted: int) -> int:
        """``wanted``, held to what is left of the job budget."""
        return wanted if self.budget is None else min(wanted, self.budget - self.reserved)

    def took(self, count: int, *, held: int) -> None:
        """After a reserve: ``count`` jobs reserved, ``held`` now held in all.

        Spending the budget drains the run; so does the drain, when a reserve
        found nothing and no job is left to finish.
        """
        self.reserved += count
        if self.budget is not None and self.reserved >= self.budget:
            self.drain("--once" if self.once else f"reached --max-jobs {self.budget}")
        elif self.drains and not count and not held:
            self.drain("the queues are empty")
