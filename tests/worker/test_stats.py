"""What a worker and `run_pending` report: an ignored or cancelled attempt is counted as itself, not as a success."""

from __future__ import annotations

from jobbridge import JobBridge
from jobbridge.outcome import WorkStats
from tests.worker import jobs
from tests.worker.conftest import Harness


def dispatch_the_mix(harness: Harness) -> JobBridge:
    """One job that succeeds, one that ignores itself, one cancelled before it ran."""
    bridge = harness.bridge()
    bridge.dispatch(jobs.Noop(n=1))
    bridge.dispatch(jobs.Ignored())
    cancelled = bridge.dispatch(jobs.Noop(n=2))
    assert cancelled is not None
    bridge.cancel(cancelled)
    return bridge


def test_the_worker_counts_ignored_and_cancelled_attempts_as_themselves(harness: Harness) -> None:
    bridge = dispatch_the_mix(harness)
    stats = harness.worker(bridge, stop_when_empty=True).run()
    assert (stats.processed, stats.succeeded, stats.ignored, stats.cancelled) == (3, 1, 1, 1)
    assert (stats.released, stats.failed) == (0, 0)
    assert stats.summary() == ("Processed 3 job attempt(s): 1 succeeded, 1 ignored, 1 cancelled, "
                               "0 released for retry, 0 failed.")
    assert ("noop", 2) not in jobs.RAN and ("ignored", 1) in jobs.RAN


def test_run_pending_counts_them_the_same_way(harness: Harness) -> None:
    bridge = dispatch_the_mix(harness)
    stats = bridge.run_pending()
    assert (stats.processed, stats.succeeded, stats.ignored, stats.cancelled) == (3, 1, 1, 1)


def test_the_summary_names_ignored_and_cancelled_only_when_there_were_some() -> None:
    assert WorkStats(2, 1, 1, 0).summary() == "Processed 2 job attempt(s): 1 succeeded, 1 released for retry, 0 failed."
    total = WorkStats(1, 1, 0, 0)
    total.merge(WorkStats(processed=2, cancelled=2))
    assert total.summary() == "Processed 3 job attempt(s): 1 succeeded, 2 cancelled, 0 released for retry, 0 failed."
