"""Declaring jobs: the `Job` base class, the `@job` decorator and their frozen `JobOptions`.

A job is a payload (dataclass fields, stored as JSON) plus a stable name and
the code that runs it. Options are class keywords, so the class body holds
only the payload and methods, and a payload field may be called ``name``,
``queue`` or ``timeout`` without clashing with an option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, dataclass_transform

from jobbridge.backoff import DEFAULT_BACKOFF, Backoff
from jobbridge.errors import JobDefinitionError
from jobbridge.rate_limits import RateLimit, RateValue, as_rate_limit

if TYPE_CHECKING:
    from jobbridge.context import JobContext

DEFAULT_QUEUE = "default"
DEFAULT_TRIES = 3
DEFAULT_TIMEOUT = 600.0
DEFAULT_UNIQUE_FOR = 3600.0


@dataclass(frozen=True, slots=True)
class JobOptions:
    """A job type's fixed options; dispatch may override queue, tries and delay per job."""

    name: str
    queue: str = DEFAULT_QUEUE
    tries: int = DEFAULT_TRIES
    timeout: float = DEFAULT_TIMEOUT
    backoff: Backoff = DEFAULT_BACKOFF
    unique_for: float = DEFAULT_UNIQUE_FOR
    store_result: bool = False
    track_started: bool = False
    result_ttl: float | None = None
    #: how often jobs of this type may start (jobbridge.rate_limits); None: no limit
    rate_limit: RateLimit | None = None

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise JobDefinitionError("a job needs a non-empty string name; it goes on the wire")
        if self.tries < 1:
            raise JobDefinitionError(f"job {self.name!r}: tries must be at least 1, got {self.tries}")
        if self.timeout <= 0:
            raise JobDefinitionError(f"job {self.name!r}: timeout must be positive, got {self.timeout}")
        if self.unique_for <= 0:
            raise JobDefinitionError(f"job {self.name!r}: unique_for must be positive, got {self.unique_for}")
        if not self.queue:
            raise JobDefinitionError(f"job {self.name!r}: queue must be a non-empty name")


@dataclass_transform()
class Job:
    """Base class for jobs; options are class keywords (``class X(Job, name="x", tries=5)``).

    Subclasses are made dataclasses, so their annotated fields are the payload.
    """

    options: ClassVar[JobOptions]

    def __init_subclass__(
        cls,
        *,
        name: str | None = None,
        queue: str = DEFAULT_QUEUE,
        tries: int = DEFAULT_TRIES,
        timeout: float = DEFAULT_TIMEOUT,
        backoff: Backoff | None = None,
        unique_for: float = DEFAULT_UNIQUE_FOR,
        store_result: bool = False,
        track_started: bool = False,
        result_ttl: float | None = None,
        rate_limit: RateLimit | RateValue | None = None,
        abstract: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(cls)
        if abstract:
            return
        if backoff is not None and not isinstance(backoff, Backoff):
            raise JobDefinitionError(
                f"{cls.__qualname__}: backoff= takes Backoff.exponential(...) or Backoff.fixed(...); "
                "for a computed delay define a backoff(self, attempt) method instead"
            )
        cls.options = JobOptions(
            name=name or f"{cls.__module__}.{cls.__qualname__}",
            queue=queue,
            tries=tries,
            timeout=float(timeout),
            backoff=backoff or DEFAULT_BACKOFF,
            unique_for=float(unique_for),
            store_result=store_result,
            track_started=track_started,
            result_ttl=result_ttl,
            rate_limit=as_rate_limit(rate_limit),
        )

    def handle(self, ctx: JobContext) -> Any:
        """Run the job; raise to fail the attempt. May be ``async def``; with ``store_result`` its
        return value (JSON) is kept in the result store."""
        raise JobDefinitionError(f"{type(self).__qualname__} has no handle(self, ctx) method")

    def failed(self, ctx: JobContext, error: BaseException) -> Awaitable[None] | None:
        """Called once, after the last attempt failed."""
        return None

    def unique_id(self) -> str | None:
        """``None``: not unique. A string: one pending job per (name, string); ``""``: one at a time."""
        return None

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based) before the next."""
        return self.options.backoff.delay(attempt)


J = TypeVar("J")


@dataclass_transform()
def job(
    name: str | None = None,
    *,
    queue: str = DEFAULT_QUEUE,
    tries: int = DEFAULT_TRIES,
    timeout: float = DEFAULT_TIMEOUT,
    backoff: Backoff | None = None,
    unique_for: float = DEFAULT_UNIQUE_FOR,
    store_result: bool = False,
    track_started: bool = False,
    result_ttl: float | None = None,
    rate_limit: RateLimit | RateValue | None = None,
) -> Callable[[type[J]], type[J]]:
    """Make a plain class with a ``handle(self, ctx)`` method a job, as if it subclassed `Job`."""

    def decorate(cls: type[J]) -> type[J]:
        if not callable(getattr(cls, "handle", None)):
            raise JobDefinitionError(f"{cls.__qualname__} needs a handle(self, ctx) method to be a job")
        if not dataclasses.is_dataclass(cls):
            dataclasses.dataclass(cls)
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
        made = type(
            cls.__name__, (cls, Job), namespace,
            name=name or f"{cls.__module__}.{cls.__qualname__}",
            queue=queue, tries=tries, timeout=timeout, backoff=backoff, unique_for=unique_for,
            store_result=store_result, track_started=track_started, result_ttl=result_ttl,
            rate_limit=rate_limit,
        )
        return made

    return decorate


def options_of(cls: type) -> JobOptions:
    """A job class's options, or a `JobDefinitionError` saying how to declare them."""
    opts = getattr(cls, "options", None)
    if not isinstance(opts, JobOptions):
        raise JobDefinitionError(
            f"{getattr(cls, '__qualname__', cls)!r} is not a job: subclass jobbridge.Job or decorate it with @job"
        )
    return opts
