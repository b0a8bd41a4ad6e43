"""OpenTelemetry tracing: a producer span per dispatched job, a consumer span per attempt, one trace.

At dispatch (every `JobBridge.push`: ``dispatch``, ``dispatch_many``, the
Celery facade's ``delay``/``apply_async``, a schedule entry pushed outside the
store's atomic fire) a ``publish <queue>`` span of kind PRODUCER is started as
a child of whatever span is current (the web request's), and the W3C trace
context (``traceparent``, ``tracestate``, and whatever else the global
propagator writes) is written into the envelope's headers. The headers travel
with the job, so minutes later, in another process, each attempt runs inside a
``process <queue>`` span of kind CONSUMER whose parent is that producer span,
with a link to it as well: every retry is a span of its own under the same
producer, told apart by ``jobbridge.attempt``. The attempt's exception is
recorded on its span and a failed or released attempt's status is ERROR.

Attributes follow OpenTelemetry's messaging conventions: ``messaging.system``
("jobbridge"), ``messaging.destination.name`` (the queue),
``messaging.operation.type``/``.name`` (``send``/``publish``, ``process``),
``messaging.message.id`` (the job id), plus ``jobbridge.job.name``,
``jobbridge.attempt``, ``jobbridge.max_attempts``, ``jobbridge.connection``
and, on a consumer span, ``jobbridge.outcome``. Payloads are never recorded.

Install with ``pip install 'jobbridge[otel]'``. `JobBridgeInstrumentor` is an
OpenTelemetry instrumentor registered under the ``opentelemetry_instrumentor``
entry point, so ``opentelemetry-instrument jobbridge worker ...`` and the
distro's auto-instrumentation load it like any other library's; or call
``JobBridgeInstrumentor().instrument()`` in the code that builds the app.
OpenTelemetry's own Celery instrumentation hooks into modules of Celery's
worker that the facade does not have: under the facade use this one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, Tracer

from jobbridge import __version__
from jobbridge.app import JobBridge
from jobbridge.envelope import Envelope, Reservation
from jobbridge.execution import Executor
from jobbridge.integrations import hooks
from jobbridge.integrations.hooks import PushNext, RunAttempt
from jobbridge.outcome import Outcome

__all__ = ["JobBridgeInstrumentor"]

SYSTEM = "jobbridge"
#: outcomes that end an attempt without an error: the span's status stays unset
_CLEAN = frozenset({"succeeded", "ignored", "revoked", "expired"})


class _HeaderGetter(Getter[Mapping[str, Any]]):
    """Reads trace headers out of an envelope's headers; a value that is not text is ignored."""

    def get(self, carrier: Mapping[str, Any], key: str) -> list[str] | None:
        value = carrier.get(key)
        return [value] if isinstance(value, str) else None

    def keys(self, carrier: Mapping[str, Any]) -> list[str]:
        return [key for key, value in carrier.items() if isinstance(value, str)]


_GETTER = _HeaderGetter()


class JobBridgeInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Spans for dispatches and attempts; ``instrument(tracer_provider=...)`` or the global provider."""

    _tracer: Tracer | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # jobbridge itself: nothing else must be installed

    def _instrument(self, **kwargs: Any) -> None:
        JobBridgeInstrumentor._tracer = trace.get_tracer(
            __name__, __version__, tracer_provider=kwargs.get("tracer_provider"))
        hooks.add_push_hook(_around_push)
        hooks.add_attempt_hook(_around_attempt)

    def _uninstrument(self, **kwargs: Any) -> None:
        hooks.remove_push_hook(_around_push)
        hooks.remove_attempt_hook(_around_attempt)
        JobBridgeInstrumentor._tracer = None


def _tracer() -> Tracer:
    return JobBridgeInstrumentor._tracer or trace.get_tracer(__name__, __version__)


#: the attributes a (job name, queue, connection, operation) always has, built once per label set
_constant: dict[tuple[str, str, str, str], dict[str, Any]] = {}


def _attributes(env: Envelope, connection: str, operation: str) -> dict[str, Any]:
    key = (env.name, env.queue, connection, operation)
    constant = _constant.get(key)
    if constant is None:
        constant = _constant[key] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": env.queue,
            "messaging.operation.type": "send" if operation == "publish" else operation,
            "messaging.operation.name": operation,
            "jobbridge.job.name": env.name,
            "jobbridge.connection": connection,
        }
    return {**constant, "messaging.message.id": env.id}


def _around_push(bridge: JobBridge, envelopes: Sequence[Envelope], connection: str,
                 push: PushNext) -> list[str | None]:
    """One producer span per envelope, its context written into the envelope's headers."""
    tracer = _tracer()
    spans, sent = [], []
    for env in envelopes:
        span = tracer.start_span(f"publish {env.queue}", kind=SpanKind.PRODUCER,
                                 attributes=_attributes(env, connection, "publish"))
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        spans.append(span)
        sent.append(env.replace(headers={**env.headers, **carrier}) if carrier else env)
    try:
        ids = push(sent)
    except BaseException as exc:
        for span in spans:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.end()
        raise
    for span, job_id in zip(spans, ids, strict=True):
        if job_id is None:
            span.set_attribute("jobbridge.dropped", "unique duplicate")
        span.end()
    return ids


def _around_attempt(executor: Executor, res: Reservation, run: RunAttempt) -> Outcome:
    """A consumer span around one attempt, the child of its dispatch's span (from the headers).

    Started and made current by hand rather than through ``start_as_current_span``'s context manager:
    this runs once per attempt, and the span ends the same way whatever the attempt did.
    """
    env = res.envelope
    current = otel_context.get_current()
    parent = propagate.extract(env.headers, context=current, getter=_GETTER)
    producer = trace.get_current_span(parent).get_span_context()
    links = [Link(producer)] if producer.is_valid and producer != trace.get_current_span(current).get_span_context() \
        else None
    attributes = _attributes(env, executor.connection, "process")
    attributes["jobbridge.attempt"] = env.attempts
    attributes["jobbridge.max_attempts"] = env.tries
    span = _tracer().start_span(f"process {env.queue}", context=parent, kind=SpanKind.CONSUMER,
                                attributes=attributes, links=links)
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    try:
        outcome = run()
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    else:
        span.set_attribute("jobbridge.outcome", outcome.label)
        if outcome.label not in _CLEAN:
            if outcome.exception is not None:
                span.record_exception(outcome.exception)
            reason = outcome.error.split("\n", 1)[0][:200] if outcome.error else outcome.label
            span.set_status(Status(StatusCode.ERROR, reason))
        return outcome
    finally:
        otel_context.detach(token)
        span.end()
