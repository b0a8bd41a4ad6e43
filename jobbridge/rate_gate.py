"""The worker's rate gate: which reserved jobs start now, which wait for their turn, which go back.

A job type with a ``rate_limit`` (jobbridge.rate_limits) may start only on a
turn of its bucket. The worker's loop passes every batch it reserves through
the gate, which books turns for the rate-limited jobs in one take per job type:

- a job whose turn is now goes to the threads at once;
- a job whose turn begins within the horizon waits *in the loop* (a heap by
  start time, no thread held, its lease renewed by the heartbeat like any held
  job) and goes to the threads when its turn comes;
- a job with no turn within the horizon goes back to the store unstarted
  (`Driver.hand_back`), its attempt count as it was, available again when a
  turn should be free. Hand-backs of one job type are spread one interval
  apart, so a backlog of thousands comes back at the rate it can run rather
  than all at once.

Jobs of other types in the same batch are never held up: they go to the
threads as they come. A store that fails a shared take (or a hand-back)
leaves the jobs waiting, untaken, for a second, then they are tried again.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from jobbridge.drivers.base import Driver
from jobbridge.envelope import Reservation
from jobbridge.errors import ConfigurationError
from jobbridge.job import options_of
from jobbridge.rate_limits import FileBuckets, Grants, LocalBuckets, RateBuckets, RateLimit
from jobbridge.registry import JobRegistry

#: a turn this close (seconds) counts as now
NOW = 0.001
#: how long jobs whose take or hand-back failed wait before they are tried again (seconds)
RETRY_AFTER = 1.0

Start = Callable[[Reservation], None]
#: hand a job back unstarted after ``delay`` seconds; False when the store call failed
HandBack = Callable[[Reservation, float], bool]
#: the worker's store call: runs the call, reports a failure and returns None for it
StoreCall = Callable[[str, Callable[[], Grants]], Grants | None]


@dataclass(order=True)
class _Waiting:
    due: float
    seq: int
    reservation: Reservation = field(compare=False)
    granted: bool = field(compare=False)  # False: no turn yet (a failed take); book one when due


class RateGate:
    """The rate-limited jobs a worker holds; see the module docstring."""

    def __init__(self, registry: JobRegistry, *, local: RateBuckets, shared: RateBuckets | None,
                 horizon: float, monotonic: Callable[[], float], store: StoreCall) -> None:
        self.registry = registry
        self.local, self.shared = local, shared
        self.horizon = horizon
        self.monotonic = monotonic
        self._store = store
        self._limits: dict[str, RateLimit | None] = {}
        self._any_limited: bool | None = None  # whether any registered job has a limit (`limits_any`)
        self._heap: list[_Waiting] = []
        self._seq = itertools.count()
        self._spread: dict[str, float] = {}  # job name -> when the next hand-back of it should come back

    @classmethod
    def for_worker(cls, registry: JobRegistry, driver: Driver, *, lease: float, monotonic: Callable[[], float],
                   store: StoreCall, file: str | None, ends_by_itself: bool) -> RateGate:
        """Per-worker limits in this process (or the ``file`` of a ``--processes N`` command), shared ones in the store.

        A job waits in the worker for at most half a lease (30 s at most) before it
        goes back to the store; a run that ends by itself (--once, --stop-when-empty)
        waits for every turn instead.
        """
        local: RateBuckets = FileBuckets(file) if file else LocalBuckets(monotonic)
        horizon = math.inf if ends_by_itself else min(lease / 2, 30.0)
        return cls(registry, local=local, shared=getattr(driver, "rate_buckets", None), horizon=horizon,
                   monotonic=monotonic, store=store)

    def check(self, connection: str, driver_name: str) -> None:
        """Refuse at start a shared limit this store cannot keep, naming the jobs and what to do."""
        wanting = [name for name in self.registry.names() if (limit := self.limit_of(name)) and limit.shared]
        if wanting and (self.shared is None or not self.shared.shared):
            raise ConfigurationError(
                f"job(s) {', '.join(sorted(wanting))} declare a rate limit shared by every worker, which the "
                f"{driver_name} driver of connection {connection!r} cannot keep (it has no shared rate "
                "buckets): run those jobs on a database or redis connection, or drop shared=True to limit "
                "them per worker")

    def limit_of(self, name: str) -> RateLimit | None:
        if name not in self._limits:
            self._limits[name] = options_of(self.registry.get(name)).rate_limit if name in self.registry else None
        return self._limits[name]

    @property
    def waiting(self) -> int:
        """How many held jobs wait for their turn (they hold no thread)."""
        return len(self._heap)

    def until_due(self) -> float:
        """Seconds until the next waiting job's turn (infinity when none waits)."""
        return max(0.0, self._heap[0].due - self.monotonic()) if self._heap else math.inf

    # -- admitting -----------------------------------------------------------------------------

    def limits_any(self, reservations: Sequence[Reservation]) -> bool:
        """Whether starting these takes a turn of some rate limit (a store call, for a shared one); per batch, and
        without a look per job when no registered job has a limit, as in most apps."""
        if self._any_limited is None:
            self._any_limited = any(self.limit_of(name) is not None for name in self.registry.names())
        if not self._any_limited:
            return False
        limits = self._limits
        for res in reservations:
            name = res.envelope.name
            if res.decode_error is None and (limits[name] if name in limits else self.limit_of(name)) is not None:
                return True
        return False

    def admit(self, reservations: Sequence[Reservation], start: Start, back: HandBack) -> None:
        """Start, hold or hand back each reservation; jobs without a limit start in the order given."""
        groups: dict[str, list[Reservation]] = {}
        limits = self._limits
        for res in reservations:
            name = res.envelope.name
            # `limit_of`, without a call per job once the name was seen
            limit = (limits[name] if name in limits else self.limit_of(name)) if res.decode_error is None else None
            if limit is None:
                start(res)
            else:
                groups.setdefault(name, []).append(res)
        for name, group in groups.items():
            self._book(name, group, start, back)

    def _book(self, name: str, group: list[Reservation], start: Start, back: HandBack) -> None:
        limit = self.limit_of(name)
        assert limit is not None
        buckets = self.shared if limit.shared and self.shared is not None else self.local
        grants = self._store(f"take rate limit turns of {name}",
                             lambda: buckets.take(name, limit, len(group), self.horizon))
        now = self.monotonic()
        if grants is None:  # the store failed the take (logged by the worker): try again shortly
            self._wait(group, now + RETRY_AFTER, granted=False)
            return
        starts = grants.starts
        for res, offset in zip(group, starts, strict=False):
            if offset <= NOW:
                start(res)
            else:
                self._wait([res], now + offset, granted=True)
        for res in group[len(starts):]:
            self._hand_back(res, self._spread_delay(name, limit, now, grants.next_in), back)

    def _spread_delay(self, name: str, limit: RateLimit, now: float, next_in: float) -> float:
        comes_back = max(self._spread.get(name, 0.0), now + max(next_in, self.horizon))
        self._spread[name] = comes_back + limit.interval
        return comes_back - now

    def _hand_back(self, res: Reservation, delay: float, back: HandBack) -> None:
        if not back(res, delay):
            self._wait([res], self.monotonic() + RETRY_AFTER, granted=False)

    def _wait(self, reservations: Iterable[Reservation], due: float, *, granted: bool) -> None:
        for res in reservations:
            heapq.heappush(self._heap, _Waiting(due, next(self._seq), res, granted))

    # -- turns coming round ----------------------------------------------------------------------

    def start_due(self, start: Start, back: HandBack) -> None:
        """Start every waiting job whose turn came; book a turn for those that had none."""
        now = self.monotonic()
        untaken: list[Reservation] = []
        while self._heap and self._heap[0].due <= now + NOW:
            waiting = heapq.heappop(self._heap)
            if waiting.granted:
                start(waiting.reservation)
            else:
                untaken.append(waiting.reservation)
        if untaken:
            self.admit(untaken, start, back)

    def hand_back_all(self, back: HandBack) -> None:
        """A stopping worker starts no waiting job: each goes back unstarted, at once."""
        heap, self._heap = self._heap, []
        for waiting in heap:
            self._hand_back(waiting.reservation, 0.0, back)
