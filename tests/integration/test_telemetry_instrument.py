"""``opentelemetry-instrument jobbridge worker ...``: the entry point is found, with no tracing code in the app.

The worker's app (``tests.integration.telemetry_app`` without
``TELEMETRY_SPANS``) sets up no tracing of its own. The worker is started by
OpenTelemetry's ``opentelemetry-instrument`` console script, which configures
the SDK from ``OTEL_*`` variables (the distro's configurator, here with the
SDK's console exporter writing each span to the worker's stdout) and loads
every instrumentor registered under the ``opentelemetry_instrumentor`` entry
point. A consumer span for the job in that output proves jobbridge's was one of
them; its parent being the dispatch's producer span (recorded here, in the
test process) proves the trace headers were read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.integration import telemetry_app
from tests.integration.reliability_support import REPO
from tests.integration.test_telemetry_otel import clean_env

pytestmark = pytest.mark.slow


def console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed (one indented object per span), other lines skipped."""
    decoder = json.JSONDecoder()
    spans, at = [], 0
    while (start := text.find("{\n", at)) != -1:
        try:
            found, at = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            at = start + 1
            continue
        if isinstance(found, dict) and "context" in found:
            spans.append(found)
    return spans


def test_opentelemetry_instrument_picks_up_the_jobbridge_instrumentor(
        tmp_path: Path, instrumented: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    _, exporter = instrumented  # the dispatch's producer span is recorded here, in the test process
    script = Path(sys.executable).with_name("opentelemetry-instrument")
    assert script.exists(), "opentelemetry-instrumentation's console script (the dev extra installs it)"
    broker = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    bridge = telemetry_app.make_celery(broker).jobbridge_app()
    try:
        bridge.driver().migrate()
        job_id = bridge.dispatch(telemetry_app.Signup(user="ada"))
    finally:
        bridge.close()
    (producer,) = [s for s in exporter.get_finished_spans() if s.name == "publish mail"]

    done = subprocess.run(
        [str(script), str(Path(sys.executable).with_name("jobbridge")), "worker",
         "-A", "tests.integration.telemetry_app:make_bridge", "-Q", "mail", "--sleep", "0.05", "--stop-when-empty"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env=clean_env(CELERY_BROKER_URL=broker, OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none",
                      OTEL_LOGS_EXPORTER="none", OTEL_SERVICE_NAME="jobbridge-worker"))
    assert done.returncode == 0, done.stderr
    consumed = [s for s in console_spans(done.stdout) if s["kind"] == "SpanKind.CONSUMER"]
    assert [s["attributes"]["messaging.message.id"] for s in consumed] == [job_id], done.stdout + done.stderr
    (span,) = consumed
    assert span["name"] == "process mail"
    assert span["attributes"]["messaging.system"] == "jobbridge"
    assert span["attributes"]["jobbridge.outcome"] == "succeeded"
    assert span["context"]["trace_id"] == f"0x{producer.context.trace_id:032x}"
    assert span["parent_id"] == f"0x{producer.context.span_id:016x}"
    assert span["resource"]["attributes"]["service.name"] == "jobbridge-worker"
