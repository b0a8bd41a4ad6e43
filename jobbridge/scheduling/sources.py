"""Entry sources: schedule entries read from data that changes while schedulers run (a table an admin edits).

Entries declared in code and in the ``schedules`` section are fixed for a
process's life and checked once, at boot, where a bad one fails the start.
An entry source is different: people edit it at run time (django-celery-beat's
tables, through the Django admin), so a bad entry in it is logged and skipped,
naming it, and never stops a scheduler that is firing every other entry.

A source is registered with `Schedules.add_source` and offers three things:

- `EntrySource.version`, a cheap value that differs whenever its entries may
  have changed (one indexed row read); each scheduler asks at most every
  `jobbridge.scheduling.scheduler.SOURCE_POLL` seconds, and reads `entries`
  again only when the value is new;
- `EntrySource.entries`, what it declares now, each entry already checked;
- `EntrySource.fired`, told what the scheduler fired of its entries (a source
  may record it where its users look, as django-celery-beat's admin shows a
  last run and a run count); only the scheduler whose push went through is
  told of a tick, so once per tick.

A source names each job by a name, arguments and options (a Celery task
name, ``args``, ``kwargs``, ``queue``): `task_message` turns those into an
envelope. The Celery facade registers its own (`use_task_messages`), so an
entry's job is the message ``send_task(name, args, kwargs, **options)`` would
push; a plain JobBridge reads the name as a job's stable name and ``kwargs`` as
its fields. The core never imports the facade: the facade hands its builder down.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from jobbridge.envelope import Envelope
from jobbridge.errors import ConfigurationError
from jobbridge.scheduling.entries import Entry

if TYPE_CHECKING:
    from jobbridge.app import JobBridge
    from jobbridge.scheduling.scheduler import Fired


class EntrySource(Protocol):
    """Entries that may change while schedulers run; see the module docstring."""

    @property
    def name(self) -> str:
        """What the source is, for log lines (``"django-celery-beat"``)."""
        ...

    def version(self) -> object:
        """A cheap value that differs from the last one whenever `entries` may have changed."""
        ...

    def entries(self) -> list[Entry]:
        """Every entry the source declares now, each checked; a bad one is logged (naming it) and left out."""
        ...

    def fired(self, fired: Sequence[Fired]) -> None:
        """What one scheduler step fired of this source's entries (each tick reported to one scheduler only)."""
        ...


class TaskMessage(Protocol):
    """The envelope of a job named by a name, its arguments and its options (Celery's ``send_task`` terms)."""

    def __call__(self, task: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                 options: Mapping[str, Any]) -> Envelope: ...


_messages: weakref.WeakKeyDictionary[JobBridge, TaskMessage] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def use_task_messages(bridge: JobBridge, build: TaskMessage) -> None:
    """Make ``build`` how entry sources of ``bridge`` turn a task name and arguments into a job (the facade's)."""
    with _lock:
        _messages[bridge] = build


def task_message(bridge: JobBridge) -> TaskMessage:
    """How ``bridge``'s sources build a named job: the builder handed down, else `job_message`."""
    with _lock:
        found = _messages.get(bridge)
    return found if found is not None else job_message(bridge)


#: options a jobbridge job cannot honour, and why
_JOB_REFUSALS = {
    "exchange": "jobbridge routes by queue alone: set the queue",
    "routing_key": "jobbridge routes by queue alone: set the queue",
    "priority": "jobbridge orders work by queue, not by message priority: give urgent work a queue the "
                "worker lists first",
}


def job_message(bridge: JobBridge) -> TaskMessage:
    """``task`` as the stable name of a job registered on ``bridge``, ``kwargs`` as its fields."""

    def build(task: str, args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any]) -> Envelope:
        if task not in bridge.registry:
            raise ConfigurationError(f"task: no job is registered as {task[:80]!r}")
        if args:
            raise ConfigurationError("args: a job takes its payload as named fields: give them as kwargs")
        for key, why in _JOB_REFUSALS.items():
            if options.get(key) is not None:
                raise ConfigurationError(f"{key}: {why}")
        try:
            job = bridge.registry.get(task)(**dict(kwargs))
        except TypeError as exc:
            raise ConfigurationError(f"kwargs: do not match the fields of {task!r} ({exc})") from None
        return bridge.envelope(job, queue=options.get("queue"), headers=options.get("headers"),
                               expires=options.get("expires"))

    return build
