"""The app `jobbridge worker -A tests.integration.poison_app:make_bridge` runs in the poison-message tests.

Settings come from the process's environment (``JOBBRIDGE_*``). Each job
records every run it makes with `reliability_app.runs` (the store named by
``JB_REL_RUNS``: a ``file://`` path works with every driver), so a test counts
how often each job ran, whatever store the jobs themselves are on.

- `Good`: one int field, nothing else; what every poison message sits beside;
- `Typed`: an int and a UUID, so a payload whose field decode *raises* (a UUID
  field holding an integer) has a field to be wrong in.
"""

from __future__ import annotations

import os
import uuid

from jobbridge import Backoff, Job, JobBridge, JobContext
from jobbridge.settings import Settings
from tests.integration.reliability_app import FileRuns, runs

GOOD = "poison.good"
TYPED = "poison.typed"


def _record(ctx: JobContext) -> None:
    store = runs()
    if isinstance(store, FileRuns):
        store.finish(store.start(ctx), ctx)
    else:
        store.start(ctx, finished=True)


class Good(Job, name=GOOD, queue="poison", tries=3, backoff=Backoff.fixed(0)):
    """A job that always succeeds: it only records that it ran."""

    n: int

    def handle(self, ctx: JobContext) -> None:
        _record(ctx)


class Typed(Job, name=TYPED, queue="poison", tries=3, backoff=Backoff.fixed(0)):
    """A job with a UUID field: decoding an integer there raises inside the UUID constructor."""

    n: int
    ref: uuid.UUID

    def handle(self, ctx: JobContext) -> None:
        _record(ctx)


ALL = [Good, Typed]


#: a settings file to load instead of the environment (a kafka connection and its lock store make a
#: connections section, which the environment cannot hold)
SETTINGS_FILE = "JB_POISON_SETTINGS"
#: a kafka connection's group session in ms: a join on Tansu waits about half of it, so tests shorten it
KAFKA_SESSION_MS = "JB_POISON_KAFKA_SESSION_MS"


def make_bridge() -> JobBridge:
    path, session = os.environ.get(SETTINGS_FILE), os.environ.get(KAFKA_SESSION_MS)
    if session:
        from jobbridge.drivers.kafka import client

        client.SESSION_TIMEOUT_MS = int(session)
    return JobBridge(Settings.from_file(path) if path else Settings.load(), jobs=ALL)
