"""OpenTelemetry across processes: a request span here, the attempt's span in a real ``jobbridge worker``.

This process plays the web process: inside a request span it dispatches a
job class, a job that fails its first attempt and a facade task, recording its
own spans in memory. The worker (``tests.integration.telemetry_app``) writes
its spans to a file. Each attempt's span must be in the request's trace, the
child of the dispatch's producer span; the retried job gives one span per
attempt, both under that producer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import IO, Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.integration import telemetry_app
from tests.integration.reliability_support import REPO, wait_for

pytestmark = pytest.mark.slow


def worker_command() -> list[str]:
    script = Path(sys.executable).with_name("jobbridge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBBRIDGE_", "CELERY_", "OTEL_"))}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}




def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_the_instrumentor_is_an_entry_point() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="opentelemetry_instrumentor")}
    assert found.get("jobbridge") == "jobbridge.integrations.opentelemetry:JobBridgeInstrumentor"


def test_an_attempt_span_joins_the_request_trace_across_processes(
        tmp_path: Path, instrumented: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = instrumented
    broker = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    app = telemetry_app.make_celery(broker)
    bridge = app.jobbridge_app()
    bridge.driver().migrate()
    tracer = provider.get_tracer("web")
    with tracer.start_as_current_span("POST /signup") as request:
        signup_id = bridge.dispatch(telemetry_app.Signup(user="ada"))
        flaky_id = bridge.dispatch(telemetry_app.Flaky())
        facade_id = telemetry_app.facade_add.apply_async((2, 3)).id
    bridge.close()
    request_ctx = request.get_span_context()
    produced = {span.attributes["messaging.message.id"]: span for span in exporter.get_finished_spans()
                if span.name.startswith("publish")}
    assert set(produced) == {signup_id, flaky_id, facade_id}
    for span in produced.values():
        assert span.context.trace_id == request_ctx.trace_id and span.parent.span_id == request_ctx.span_id
        assert span.attributes["messaging.system"] == "jobbridge"

    spans_file = tmp_path / "spans.jsonl"
    log = tmp_path / "worker.log"
    out: IO[bytes] = log.open("wb")
    proc = subprocess.Popen(
        [*worker_command(), "worker", "-A", "tests.integration.telemetry_app:make_bridge", "--sleep", "0.05",
         "-Q", "default,mail,celery"],
        cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
        env=clean_env(CELERY_BROKER_URL=broker, TELEMETRY_SPANS=str(spans_file)))
    out.close()
    try:
        wait_for(lambda: len([s for s in read_spans(spans_file) if s["kind"] == "CONSUMER"]) >= 4,
                 "four attempt spans", timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    consumed = [s for s in read_spans(spans_file) if s["kind"] == "CONSUMER"]
    trace_id = f"{request_ctx.trace_id:032x}"
    by_job: dict[str, list[dict[str, Any]]] = {}
    for span in consumed:
        by_job.setdefault(span["attributes"]["messaging.message.id"], []).append(span)
    assert set(by_job) == {signup_id, flaky_id, facade_id}, log.read_text()
    for job_id, spans in by_job.items():
        producer = f"{produced[job_id].context.span_id:016x}"
        for span in spans:
            assert span["trace_id"] == trace_id
            assert span["parent"] == producer and producer in span["links"]
            assert span["attributes"]["messaging.operation.type"] == "process"
    flaky = sorted(by_job[flaky_id], key=lambda s: s["attributes"]["jobbridge.attempt"])
    assert [s["attributes"]["jobbridge.attempt"] for s in flaky] == [1, 2]
    assert [s["attributes"]["jobbridge.outcome"] for s in flaky] == ["released", "succeeded"]
    assert flaky[0]["status"] == "ERROR" and "exception" in flaky[0]["events"]
    assert flaky[1]["status"] == "UNSET"
    assert by_job[facade_id][0]["attributes"]["jobbridge.job.name"] == "tele.facade"
    assert by_job[signup_id][0]["attributes"]["messaging.destination.name"] == "mail"


def test_a_dispatch_outside_any_span_starts_a_trace_and_the_headers_carry_it(
        instrumented: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path) -> None:
    _, exporter = instrumented
    app = telemetry_app.make_celery("memory://")
    bridge = app.jobbridge_app()
    bridge.dispatch(telemetry_app.Signup(user="bo"))
    (res,) = bridge.driver().reserve(["mail"], 1)
    assert str(res.envelope.headers["traceparent"]).startswith("00-")
    bridge.executor().run(res)
    publish, process = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    assert publish.parent is None and process.parent is not None
    assert process.parent.span_id == publish.context.span_id
    assert process.context.trace_id == publish.context.trace_id
