"""Results and durable cancellation through the app: states, values, errors, revoke and terminate."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jobbridge import ConfigurationError, Job, JobBridge, JobContext, Settings, signals
from jobbridge.results.base import FAILURE, RETRY, REVOKED, STARTED, SUCCESS
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending

SEEN: dict[str, Any] = {}
RUNNING = threading.Event()


class Add(Job, name="results.add", store_result=True, track_started=True):
    a: int
    b: int

    def handle(self, ctx: JobContext) -> int:
        bridge: JobBridge = ctx.resolve(JobBridge)
        record = bridge.result(ctx.id)
        SEEN["state while running"] = record.state if record else None
        return self.a + self.b


class Boom(Job, name="results.boom", store_result=True, tries=2):
    def handle(self, ctx: JobContext) -> None:
        raise KeyError("no such thing")


class Unstorable(Job, name="results.unstorable", store_result=True):
    def handle(self, ctx: JobContext) -> object:
        return object()


class Quiet(Job, name="results.quiet"):
    def handle(self, ctx: JobContext) -> int:
        SEEN["quiet ran"] = True
        return 1


class Progress(Job, name="results.progress", store_result=True):
    def handle(self, ctx: JobContext) -> str:
        ctx.resolve(JobBridge).store_state(ctx.id, "PROGRESS", meta={"done": 3, "of": 10})
        SEEN["progress"] = ctx.resolve(JobBridge).result(ctx.id)
        return "ok"


class Spin(Job, name="results.spin", store_result=True, timeout=30):
    def handle(self, ctx: JobContext) -> None:
        RUNNING.set()
        while True:  # pure Python: a terminate reaches it
            pass


class Sleeper(Job, name="results.sleeper", store_result=True, timeout=30):
    async def handle(self, ctx: JobContext) -> None:
        RUNNING.set()
        await asyncio.sleep(30)


JOBS = [Add, Boom, Unstorable, Quiet, Progress, Spin, Sleeper]


@pytest.fixture
def bridge(jobbridge_memory: JobBridge) -> JobBridge:
    SEEN.clear()
    RUNNING.clear()
    jobbridge_memory.register(*JOBS)
    jobbridge_memory.container.instance(JobBridge, jobbridge_memory)
    return jobbridge_memory


def test_success_stores_the_return_value(bridge: JobBridge) -> None:
    job_id = bridge.dispatch(Add(a=2, b=3))
    assert job_id
    assert bridge.result(job_id) is None  # nothing stored until it starts: PENDING to a reader
    bridge.run_pending()
    record = bridge.result(job_id)
    assert record is not None and (record.state, record.result, record.name) == (SUCCESS, 5, "results.add")
    assert SEEN["state while running"] == STARTED


def test_a_failure_stores_retry_then_failure_with_its_error(bridge: JobBridge, jobbridge_clock: FixedClock) -> None:
    job_id = bridge.dispatch(Boom())
    assert job_id
    bridge.run_pending()
    record = bridge.result(job_id)
    assert record is not None and record.state == RETRY
    jobbridge_clock.advance(5)
    bridge.run_pending()
    record = bridge.result(job_id)
    assert record is not None and record.state == FAILURE
    assert record.error == "KeyError: 'no such thing'"
    assert record.exception_type == "builtins.KeyError" and "raise KeyError" in (record.traceback or "")


def test_a_value_that_is_not_json_is_stored_as_a_failure(bridge: JobBridge) -> None:
    job_id = bridge.dispatch(Unstorable())
    assert job_id
    assert bridge.run_pending().succeeded == 1
    record = bridge.result(job_id)
    assert record is not None and record.state == FAILURE and "JSON" in (record.error or "")


def test_a_job_without_store_result_stores_nothing(bridge: JobBridge) -> None:
    job_id = bridge.dispatch(Quiet())
    assert job_id
    bridge.run_pending()
    assert bridge.result(job_id) is None


def test_progress_is_visible_at_once(bridge: JobBridge) -> None:
    job_id = bridge.dispatch(Progress())
    assert job_id
    bridge.run_pending()
    assert SEEN["progress"].state == "PROGRESS" and SEEN["progress"].meta == {"done": 3, "of": 10}
    record = bridge.result(job_id)
    assert record is not None and record.state == SUCCESS


def test_wait_wakes_when_the_job_ends(bridge: JobBridge) -> None:
    job_id = bridge.dispatch(Add(a=1, b=1))
    assert job_id
    threading.Timer(0.2, bridge.run_pending).start()
    record = bridge.wait(job_id, timeout=20)
    assert record is not None and record.state == SUCCESS and record.result == 2
    assert bridge.wait("unknown-id", timeout=0.05) is None


def test_a_cancelled_job_never_runs_and_ends_revoked(bridge: JobBridge) -> None:
    cancelled: list[bool] = []

    def receiver(sender: Any, **kw: Any) -> None:
        cancelled.append(kw["terminated"])

    signals.job_cancelled.connect(receiver)
    try:
        job_id = bridge.dispatch(Quiet())
        assert job_id
        bridge.cancel(job_id)
        stats = bridge.run_pending()
    finally:
        signals.job_cancelled.disconnect(receiver)
    assert "quiet ran" not in SEEN
    assert stats.processed == 1 and pending(bridge.driver(), "default") == 0
    record = bridge.result(job_id)
    assert record is not None and record.state == REVOKED
    assert cancelled == [False]


def test_a_cancellation_survives_a_restart_and_reaches_an_offline_worker(tmp_path: Path) -> None:
    settings = Settings.from_mapping({"database_url": f"sqlite:///{tmp_path / 'jobs.sqlite3'}"})
    web = JobBridge(settings, jobs=JOBS)
    job_id = web.dispatch(Quiet())
    assert job_id
    web.cancel(job_id)
    web.close()
    worker = JobBridge(settings, jobs=JOBS)  # started later, never saw the cancel being sent
    assert worker.run_pending().processed == 1
    assert "quiet ran" not in SEEN
    record = worker.result(job_id)
    assert record is not None and record.state == REVOKED
    worker.close()


@pytest.mark.parametrize("job", [Spin(), Sleeper()], ids=["sync", "async"])
def test_terminate_stops_a_running_job_which_ends_revoked(bridge: JobBridge, job: Job) -> None:
    job_id = bridge.dispatch(job)
    assert job_id
    (res,) = bridge.driver().reserve(["default"], 1)
    executor = bridge.executor()
    outcomes: list[Any] = []
    runner = threading.Thread(target=lambda: outcomes.append(executor.run(res)))
    runner.start()
    assert RUNNING.wait(10)
    bridge.cancel(job_id, terminate=True)
    executor.refresh_cancellations([])  # what the worker's heartbeat does
    runner.join(10)
    assert not runner.is_alive(), "the attempt was not stopped"
    (outcome,) = outcomes
    assert (outcome.action, outcome.label) == ("acknowledge", "revoked")
    record = bridge.result(job_id)
    assert record is not None and record.state == REVOKED


def test_cancel_without_terminate_lets_a_running_job_finish(bridge: JobBridge) -> None:
    job_id = bridge.dispatch(Add(a=1, b=2))
    assert job_id
    (res,) = bridge.driver().reserve(["default"], 1)
    bridge.cancel(job_id)
    executor = bridge.executor()
    start = time.monotonic()
    outcome = executor.run(res)  # not refreshed: it had started before the cancel arrived
    assert outcome.label == "succeeded" and time.monotonic() - start < 10


def test_no_store_is_a_clear_error() -> None:
    bridge = JobBridge(Settings.from_mapping({"driver": "sync"}), jobs=JOBS)
    assert bridge.results is None
    with pytest.raises(ConfigurationError, match="results = a store URL"):
        bridge.cancel("x")
