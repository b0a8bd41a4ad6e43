"""Job states in the result store, and the cancelled set, as the executor and the worker see them.

Only jobs that ask for it (``store_result``, ``track_started``) cost a write per
state; the cancelled set is read once per reserved batch and once per
heartbeat, never once per job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from jobbridge.context import JobContext
from jobbridge.envelope import Envelope
from jobbridge.errors import JobBridgeError, PayloadEncodeError
from jobbridge.job import JobOptions
from jobbridge.outcome import Outcome
from jobbridge.results.base import FAILURE, RETRY, REVOKED, STARTED, SUCCESS, ResultRecord, ResultStore

log = logging.getLogger("jobbridge.results")
TERMINATE = ":terminate"  # beside a cancelled id, this key asks a running attempt to be stopped
PRUNE_EVERY = 300.0


def terminate_key(job_id: str) -> str:
    return job_id + TERMINATE


class ResultTracker:
    """Writes one app's job states and reads its cancellations, in one store."""

    def __init__(self, store: ResultStore, ttl: float) -> None:
        self.store = store
        self.ttl = ttl
        self._next_prune = 0.0

    def _ttl(self, options: JobOptions | None) -> float:
        return options.result_ttl if options is not None and options.result_ttl else self.ttl

    def write(self, job_id: str, state: str, *, name: str | None = None, options: JobOptions | None = None,
              **fields: Any) -> None:
        """Store one state; a store that fails is logged, never the job's failure."""
        try:
            self.store.store(ResultRecord(id=job_id, state=state, name=name, **fields), self._ttl(options))
        except JobBridgeError:
            log.exception("could not store state %s of job %s", state, job_id)

    def started(self, ctx: JobContext, options: JobOptions) -> None:
        if options.track_started:
            self.write(ctx.id, STARTED, name=ctx.name, options=options, meta={"attempt": ctx.attempt})

    def settled(self, outcome: Outcome, options: JobOptions | None, value: Any) -> None:
        """The state an attempt ended in: SUCCESS with its value, RETRY, FAILURE or REVOKED."""
        env = outcome.reservation.envelope
        if outcome.label == "revoked":
            self.write(env.id, REVOKED, name=env.name, options=options)
            return
        if options is None or not options.store_result or outcome.label == "ignored":
            return
        if outcome.action == "acknowledge":
            self._success(env, options, value)
        elif outcome.action == "release":
            self.write(env.id, RETRY, name=env.name, options=options, **_failure_fields(outcome))
        else:
            self.write(env.id, FAILURE, name=env.name, options=options, **_failure_fields(outcome))

    def _success(self, env: Envelope, options: JobOptions, value: Any) -> None:
        try:
            self.store.store(ResultRecord(id=env.id, state=SUCCESS, name=env.name, result=value),
                             self._ttl(options))
        except PayloadEncodeError as exc:
            # The job ran; only its value cannot be kept. Say so where the caller will look.
            self.write(env.id, FAILURE, name=env.name, options=options, error=f"{type(exc).__name__}: {exc}",
                       exception_type=f"{type(exc).__module__}.{type(exc).__qualname__}")
        except JobBridgeError:
            log.exception("could not store the result of job %s", env.id)

    def cancelled(self, ids: Sequence[str], running: Sequence[str] = ()) -> tuple[set[str], set[str]]:
        """Which ``ids`` are cancelled, and which ``running`` ones were asked to be stopped."""
        if not ids and not running:
            return set(), set()
        found = self.store.cancelled([*ids, *running, *(terminate_key(i) for i in running)])
        stop = {i for i in running if terminate_key(i) in found}
        return {i for i in found if not i.endswith(TERMINATE)}, stop

    def cancel(self, ids: Sequence[str], terminate: bool) -> None:
        keys = list(ids) + ([terminate_key(i) for i in ids] if terminate else [])
        self.store.cancel(keys, self.ttl)

    def maybe_prune(self) -> None:
        """Delete expired results and cancellations, at most every few minutes."""
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + PRUNE_EVERY
        try:
            pruned = self.store.prune()
        except JobBridgeError:
            log.exception("pruning expired results failed; it will be tried again")
            return
        if pruned:
            log.info("pruned %d expired result(s) and cancellation(s)", pruned)


def _failure_fields(outcome: Outcome) -> Mapping[str, Any]:
    exc = outcome.exception
    head, _, rest = outcome.error.partition("\n")
    return {
        "error": head,
        "traceback": rest or None,
        "exception_type": None if exc is None else f"{type(exc).__module__}.{type(exc).__qualname__}",
    }
