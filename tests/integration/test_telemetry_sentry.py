"""Sentry with a transport that keeps events in a list: nothing is sent anywhere (the DSN's port is never used).

A job's final failure gives one event with the job's tags and no payload (no
field value anywhere in the event, frame variables included); a retried
attempt gives none unless asked; each attempt leaves breadcrumbs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import sentry_sdk
from sentry_sdk.envelope import Envelope as SentryEnvelope
from sentry_sdk.transport import Transport

from jobbridge import Job, JobBridge, JobContext
from jobbridge.integrations.sentry import JobBridgeIntegration
from jobbridge.settings import Settings

SECRET = "s3cret-card-4242"


class Recorded(Transport):
    """Keeps each event instead of sending it."""

    events: list[dict[str, Any]] = []

    def capture_envelope(self, envelope: SentryEnvelope) -> None:
        for item in envelope.items:
            if item.type in ("event", "error"):
                payload = item.payload.json
                assert payload is not None
                Recorded.events.append(payload)


class Charge(Job, name="sentry.charge", queue="billing", tries=2):
    card: str

    def handle(self, ctx: JobContext) -> None:
        card = self.card  # a local holding the payload: must not reach Sentry
        raise RuntimeError(f"the gateway refused attempt {ctx.attempt}" + ("" if card else "!"))


@pytest.fixture
def sentry() -> Iterator[type[Recorded]]:
    Recorded.events = []

    def init(**options: Any) -> None:
        sentry_sdk.init(dsn="http://key@127.0.0.1:9/1", transport=Recorded, default_integrations=False,
                        auto_enabling_integrations=False, **options)

    yield init  # type: ignore[misc]
    sentry_sdk.get_client().close()
    sentry_sdk.init()  # no DSN: a client that sends nothing


def run(bridge: JobBridge, job: Any) -> None:
    bridge.dispatch(job)
    bridge.run_pending()


def bridge() -> JobBridge:
    return JobBridge(Settings.from_mapping({"driver": "memory", "queues": ["billing"]}), jobs=[Charge])


def test_a_final_failure_is_one_event_with_the_jobs_tags_and_no_payload(sentry: Any) -> None:
    sentry(integrations=[JobBridgeIntegration()])
    app = bridge()
    app.dispatch(Charge(card=SECRET))
    (res,) = app.driver().reserve(["billing"], 1)
    job_id = res.id
    outcome = app.executor().run(res)
    assert outcome.action == "release"
    app.driver().release(res, 0)
    (res,) = app.driver().reserve(["billing"], 1)
    assert app.executor().run(res).action == "fail"
    sentry_sdk.flush()
    assert len(Recorded.events) == 1, Recorded.events
    event = Recorded.events[0]
    assert event["tags"] == {"jobbridge.job": "sentry.charge", "jobbridge.job_id": job_id,
                             "jobbridge.queue": "billing", "jobbridge.attempt": "2",
                             "jobbridge.connection": "memory"}
    assert event["level"] == "error"
    assert event["exception"]["values"][-1]["type"] == "RuntimeError"
    assert event["exception"]["values"][-1]["mechanism"]["type"] == "jobbridge"
    crumbs = [c["message"] for c in event["breadcrumbs"]["values"] if c.get("category") == "jobbridge"]
    assert crumbs == ["attempt 2 of sentry.charge started", "attempt 2 of sentry.charge failed"]
    assert SECRET not in json.dumps(event)


def test_each_failed_attempt_when_asked_and_the_payload_when_asked(sentry: Any) -> None:
    sentry(integrations=[JobBridgeIntegration(capture_attempts=True, send_payload=True)])
    app = bridge()
    app.dispatch(Charge(card=SECRET))
    (res,) = app.driver().reserve(["billing"], 1)
    app.executor().run(res)
    sentry_sdk.flush()
    (event,) = Recorded.events
    assert event["level"] == "warning" and event["tags"]["jobbridge.attempt"] == "1"
    assert event["contexts"]["jobbridge"]["payload"] == {"card": SECRET}


def test_without_the_integration_nothing_is_captured(sentry: Any) -> None:
    sentry(integrations=[])
    run(bridge(), Charge(card=SECRET))
    sentry_sdk.flush()
    assert Recorded.events == []
