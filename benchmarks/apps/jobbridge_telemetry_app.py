"""jobbridge's benchmark app with telemetry on: ``-A benchmarks.apps.jobbridge_telemetry_app:bridge``.

The same jobs and store as `benchmarks.apps.jobbridge_app`, with OpenTelemetry
and Sentry set up as a user would in the module ``-A`` names (the worker's
``--metrics-port`` adds Prometheus; the heartbeat is always on):

- OpenTelemetry: the SDK's `TracerProvider` with a `BatchSpanProcessor`, as in
  production, whose exporter drops the spans (counting them): each attempt's
  span is built, queued and handed to an exporter; nothing leaves the process.
- Sentry: ``sentry_sdk.init`` with `JobBridgeIntegration` and its default
  integrations, and a transport that keeps events in memory (a DSN on
  127.0.0.1 that is never dialled).

So the figure is what jobbridge's hooks and the two SDKs cost per attempt, not
what a collector or Sentry's servers take to answer.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import sentry_sdk
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from sentry_sdk.transport import Transport

from benchmarks.apps.jobbridge_app import bridge
from jobbridge.integrations.opentelemetry import JobBridgeInstrumentor
from jobbridge.integrations.sentry import JobBridgeIntegration

__all__ = ["bridge"]


class DroppingExporter(SpanExporter):
    """Counts the spans it is handed and keeps none."""

    def __init__(self) -> None:
        self.exported = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.exported += len(spans)
        return SpanExportResult.SUCCESS


class RecordingTransport(Transport):
    """Keeps the envelopes Sentry would send, in memory."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.envelopes: list[Any] = []

    def capture_envelope(self, envelope: Any) -> None:
        self.envelopes.append(envelope)


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(DroppingExporter()))
trace.set_tracer_provider(provider)
JobBridgeInstrumentor().instrument(tracer_provider=provider)

sentry_sdk.init(dsn="http://public@127.0.0.1:9/1", transport=RecordingTransport,
                integrations=[JobBridgeIntegration()])
