"""The app the telemetry tests run under real ``jobbridge worker`` processes: jobs, a facade task, exporters.

``TELEMETRY_SPANS`` names a file: every finished span is appended to it as one
JSON line (trace id, span id, parent, kind, attributes, events, links), by
`JsonLinesExporter`, so the test reads what the worker's spans were. The
broker comes from ``CELERY_BROKER_URL``. ``TELEMETRY_FAILS`` names the job
numbers (``Batch.n``) that raise, for the metrics test.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence

from jobbridge.compat import Celery, shared_task

from jobbridge import Backoff, Job, JobContext
from jobbridge.app import JobBridge

SPANS_VARIABLE = "TELEMETRY_SPANS"


def span_record(span: object) -> dict[str, object]:
    """What a test needs of a finished span, as JSON types."""
    from opentelemetry.sdk.trace import ReadableSpan

    assert isinstance(span, ReadableSpan)
    ctx = span.get_span_context()
    assert ctx is not None
    return {
        "name": span.name, "kind": span.kind.name, "trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}",
        "parent": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "attributes": dict(span.attributes or {}), "status": span.status.status_code.name,
        "events": [event.name for event in span.events],
        "links": [f"{link.context.span_id:016x}" for link in span.links],
    }


def _tracing(path: str) -> None:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from jobbridge.integrations.opentelemetry import JobBridgeInstrumentor

    class JsonLinesExporter(SpanExporter):
        """Appends each span to a file as a JSON line (one write per span, under a lock)."""

        def __init__(self) -> None:
            self._lock = threading.Lock()

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            lines = "".join(json.dumps(span_record(span)) + "\n" for span in spans)
            with self._lock, open(path, "a") as out:
                out.write(lines)
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter()))
    JobBridgeInstrumentor().instrument(tracer_provider=provider)


if os.environ.get(SPANS_VARIABLE):
    _tracing(os.environ[SPANS_VARIABLE])

FAILS = {int(n) for n in os.environ.get("TELEMETRY_FAILS", "").split(",") if n}


class Signup(Job, name="tele.signup", queue="mail"):
    user: str

    def handle(self, ctx: JobContext) -> None:
        pass


class Flaky(Job, name="tele.flaky", tries=3, backoff=Backoff.fixed(0)):
    """Fails its first attempt, succeeds on the second."""

    def handle(self, ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise ConnectionError("the first attempt always fails")


class Batch(Job, name="tele.batch", queue="bulk", tries=1):
    n: int

    def handle(self, ctx: JobContext) -> None:
        if self.n in FAILS:
            raise ValueError(f"job {self.n} fails")


@shared_task(name="tele.facade")
def facade_add(x: int, y: int) -> int:
    return x + y


def make_celery(broker: str) -> Celery:
    """The facade app on ``broker``, with the job classes registered on its jobbridge app too."""
    app = Celery("telemetry", broker=broker)
    app.jobbridge_app().register(Signup, Flaky, Batch)
    return app


def make_bridge() -> JobBridge:
    """What ``-A tests.integration.telemetry_app:make_bridge`` runs: the app on ``CELERY_BROKER_URL``."""
    bridge: JobBridge = make_celery(os.environ["CELERY_BROKER_URL"]).jobbridge_app()
    return bridge
