"""Declaring and registering jobs."""

from __future__ import annotations

import pytest

from jobbridge import Backoff, Job, JobBridge, JobContext, JobDefinitionError, UnknownJob, job
from jobbridge.registry import JobRegistry
from tests.unit.jobs import Flaky, Notify


def test_options_come_from_class_keywords_with_the_documented_defaults() -> None:
    class Plain(Job, name="t.plain"):
        def handle(self, ctx: JobContext) -> None: ...

    opts = Plain.options
    assert (opts.name, opts.queue, opts.tries, opts.timeout, opts.unique_for) == (
        "t.plain", "default", 3, 600.0, 3600.0)
    assert opts.backoff == Backoff.exponential(base=1, max=300)
    assert Notify.options.queue == "mail" and Notify.options.tries == 5


def test_options_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Notify.options.tries = 9  # type: ignore[misc]


def test_decorated_class_behaves_like_a_subclass() -> None:
    instance = Notify(post_id=3)
    assert isinstance(instance, Job)
    assert instance.unique_id() is None
    assert Notify.__qualname__ == "Notify"


def test_a_class_without_handle_cannot_be_a_job() -> None:
    with pytest.raises(JobDefinitionError, match="handle"):
        @job("t.nohandle")
        class NoHandle:
            x: int


def test_bad_options_are_refused_at_class_creation() -> None:
    with pytest.raises(JobDefinitionError, match="tries"):
        class Zero(Job, name="t.zero", tries=0):
            pass
    with pytest.raises(JobDefinitionError, match="backoff"):
        class Bad(Job, name="t.bad", backoff=30):  # type: ignore[arg-type]
            pass


def test_two_classes_with_one_name_fail_at_registration() -> None:
    class First(Job, name="t.same"):
        pass

    class Second(Job, name="t.same"):
        pass

    registry = JobRegistry()
    registry.register(First, First)
    with pytest.raises(JobDefinitionError, match=r"two job classes share the name .t\.same."):
        registry.register(Second)


def test_unknown_name_and_unregistered_class() -> None:
    registry = JobRegistry()
    registry.register(Notify)
    with pytest.raises(UnknownJob, match=r"tests\.nope"):
        registry.get("tests.nope")
    with pytest.raises(UnknownJob, match=r"bridge\.register"):
        registry.name_of(Flaky)


def test_exponential_backoff_doubles_and_caps() -> None:
    b = Backoff.exponential(base=1, max=300, jitter=False)
    assert [b.delay(n) for n in (1, 2, 3, 4, 10, 30)] == [1, 2, 4, 8, 300, 300]
    jittered = Backoff.exponential(base=10, max=300)
    assert all(5 <= jittered.delay(1) <= 10 for _ in range(50))
    assert Backoff.fixed(30).delay(7) == 30


def test_dispatching_an_unregistered_job_fails_at_once(jobbridge_memory: JobBridge) -> None:
    with pytest.raises(UnknownJob, match="not registered"):
        jobbridge_memory.dispatch(Flaky(fail_times=0))
