"""Prometheus attempt metrics: noted per attempt, added per series by `flush`, as ``inc``/``observe`` would have.

The attempt hook only notes how each attempt ended; a flush (each second, at
the worker's stop, at exit) adds the notes to ``jobbridge_attempts_total`` and
the duration histogram. The counts and every bucket must come out as one
``inc()`` and one ``observe()`` per attempt would have made them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from jobbridge import Job, JobBridge, JobContext, Settings
from jobbridge.envelope import Reservation
from jobbridge.integrations import hooks, prometheus


class Counted(Job, name="prom.counted", tries=1):
    fail: bool = False

    def handle(self, ctx: JobContext) -> None:
        if self.fail:
            raise ValueError("no")


@pytest.fixture
def bridge() -> Iterator[JobBridge]:
    found = JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[Counted])
    prometheus.instrument()
    yield found
    hooks.remove_attempt_hook(prometheus._around_attempt)
    hooks.remove_push_hook(prometheus._around_push)
    found.close()


def _value(name: str, **labels: str) -> float:
    found = REGISTRY.get_sample_value(name, labels)
    return 0.0 if found is None else found


def test_a_flush_adds_what_one_inc_and_one_observe_per_attempt_would(bridge: JobBridge) -> None:
    queue = "prom-q"
    succeeded = _value("jobbridge_attempts_total", job="prom.counted", queue=queue, outcome="succeeded")
    failed = _value("jobbridge_attempts_total", job="prom.counted", queue=queue, outcome="failed")
    count = _value("jobbridge_attempt_duration_seconds_count", job="prom.counted", queue=queue)
    infinite = _value("jobbridge_attempt_duration_seconds_bucket", job="prom.counted", queue=queue, le="+Inf")
    executor = bridge.executor()
    outcomes = []
    for fail in (False, False, True, False):
        env = bridge.envelope(Counted(fail=fail), queue=queue).replace(attempts=1)
        outcomes.append(executor.run(Reservation(env, None, float("inf"))))
    prometheus.flush()
    assert _value("jobbridge_attempts_total", job="prom.counted", queue=queue, outcome="succeeded") == succeeded + 3
    assert _value("jobbridge_attempts_total", job="prom.counted", queue=queue, outcome="failed") == failed + 1
    assert _value("jobbridge_attempt_duration_seconds_count", job="prom.counted", queue=queue) == count + 4
    assert _value("jobbridge_attempt_duration_seconds_bucket", job="prom.counted", queue=queue,
                  le="+Inf") == infinite + 4
    fastest = min(o.duration_ms for o in outcomes) / 1000
    assert fastest <= 0.005  # a no-op attempt: in the first bucket, so every bucket counts it
    assert _value("jobbridge_attempt_duration_seconds_bucket", job="prom.counted", queue=queue, le="0.005") >= 1
    assert _value("jobbridge_attempt_duration_seconds_sum", job="prom.counted", queue=queue) >= sum(
        o.duration_ms for o in outcomes) / 1000 - 1e-9
