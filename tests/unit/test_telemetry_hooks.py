"""The declared telemetry hooks (`jobbridge.telemetry_hooks`): none, nothing wraps; some, they run around it.

An attempt hook runs around `Executor.run`, a push hook around `JobBridge.push`
(it may change the envelopes' headers); a hook that raises before it calls on
is skipped and the attempt's outcome, or the push, stands; removing the last
hook leaves the attempt unwrapped again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from jobbridge import Job, JobBridge, JobContext, Settings, execution, telemetry_hooks
from jobbridge.envelope import Envelope, Reservation
from jobbridge.execution import Executor
from jobbridge.integrations import hooks
from jobbridge.outcome import Outcome


class Hello(Job, name="hooks.hello"):
    def handle(self, ctx: JobContext) -> str:
        return "hi"


@pytest.fixture
def bridge() -> Iterator[JobBridge]:
    """A bridge, with this process's hooks set aside (an integration set up by an earlier test stays for good)."""
    kept = (telemetry_hooks.ATTEMPT_HOOKS[:], telemetry_hooks.PUSH_HOOKS[:])
    telemetry_hooks.ATTEMPT_HOOKS.clear()
    telemetry_hooks.PUSH_HOOKS.clear()
    found = JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[Hello])
    yield found
    found.close()
    telemetry_hooks.ATTEMPT_HOOKS[:], telemetry_hooks.PUSH_HOOKS[:] = kept


def _reservation(bridge: JobBridge) -> Reservation:
    return Reservation(bridge.envelope(Hello()).replace(attempts=1), None, float("inf"))


def test_with_no_hook_nothing_wraps_the_attempt(bridge: JobBridge, monkeypatch: pytest.MonkeyPatch) -> None:
    def wrapped(*args: object) -> Outcome:
        raise AssertionError("an attempt was wrapped with no hook added")

    monkeypatch.setattr(execution, "around_attempt", wrapped)
    assert telemetry_hooks.ATTEMPT_HOOKS == []
    assert bridge.executor().run(_reservation(bridge)).label == "succeeded"


def test_attempt_hooks_run_around_the_attempt_and_one_that_raises_is_skipped(bridge: JobBridge) -> None:
    seen: list[str] = []

    def watching(executor: Executor, res: Reservation, run: hooks.RunAttempt) -> Outcome:
        seen.append(f"before {res.envelope.name}")
        outcome = run()
        seen.append(f"after {outcome.label}")
        return outcome

    def broken(executor: Executor, res: Reservation, run: hooks.RunAttempt) -> Outcome:
        raise RuntimeError("telemetry broke")

    hooks.add_attempt_hook(watching)
    hooks.add_attempt_hook(watching)  # once, however often given
    hooks.add_attempt_hook(broken)
    try:
        outcome = bridge.executor().run(_reservation(bridge))
    finally:
        hooks.remove_attempt_hook(watching)
        hooks.remove_attempt_hook(broken)
    assert outcome.label == "succeeded"
    assert seen == ["before hooks.hello", "after succeeded"]
    assert telemetry_hooks.ATTEMPT_HOOKS == []


def test_a_push_hook_sees_the_connection_and_may_add_headers(bridge: JobBridge) -> None:
    calls: list[tuple[str, int]] = []

    def tagging(bridge: JobBridge, envelopes: Sequence[Envelope], connection: str,
                push: hooks.PushNext) -> list[str | None]:
        calls.append((connection, len(envelopes)))
        return push([env.replace(headers={**env.headers, "tag": "x"}) for env in envelopes])

    hooks.add_push_hook(tagging)
    try:
        ids = bridge.dispatch_many([Hello(), Hello()])
    finally:
        hooks.remove_push_hook(tagging)
    # once per push: the hooks' own call of the push runs no hook again
    assert calls == [(bridge.settings.connection().name, 2)]
    assert telemetry_hooks.PUSH_HOOKS == []
    held = bridge.driver().reserve(["default"], 10)
    assert sorted(res.id for res in held) == sorted(i for i in ids if i is not None)
    assert all(res.envelope.headers.get("tag") == "x" for res in held)
