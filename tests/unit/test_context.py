"""The per-attempt builders make exactly what the frozen dataclasses' own constructors make."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from jobbridge.container import Container
from jobbridge.context import JobContext, attempt_context
from jobbridge.envelope import Envelope, Reservation
from jobbridge.outcome import Outcome, acknowledged


def test_attempt_context_sets_every_field_as_the_constructor_does() -> None:
    values = ("id-1", "a.job", "q", 2, 5, 30.0, "other", Container(), logging.getLogger("x"), {"h": 1}, object())
    built = attempt_context(*values)
    assert type(built) is JobContext
    assert built == JobContext(*values)
    assert [getattr(built, f.name) for f in dataclasses.fields(JobContext)] == list(values)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.attempt = 3  # type: ignore[misc]


def test_the_builders_know_every_field() -> None:
    """A field added to either class must be added to its builder, or this fails."""
    assert [f.name for f in dataclasses.fields(JobContext)] == [
        "id", "name", "queue", "attempt", "max_attempts", "timeout", "connection", "container", "logger",
        "headers", "job"]
    assert [f.name for f in dataclasses.fields(Outcome)] == [
        "reservation", "action", "label", "delay", "error", "exception", "duration_ms"]


def test_acknowledged_is_the_outcome_the_constructor_makes() -> None:
    env = Envelope(id="j", name="n", queue="q", payload={}, tries=1, timeout=1.0, available_at=0.0, created_at=0.0)
    res = Reservation(env, None, float("inf"))
    built = acknowledged(res, "succeeded", 1.25)
    assert type(built) is Outcome
    assert built == Outcome(res, "acknowledge", "succeeded", duration_ms=1.25)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.label = "failed"  # type: ignore[misc]
