"""The app the dashboard's browser tests run under a real worker and a real ``jobbridge dashboard``.

``DASH_STORE`` is the store's URL (a SQLite file or Redis under a prefix of its
own, ``DASH_PREFIX``); ``DASH_DIR`` a folder: while ``DASH_DIR/failing`` exists
a `Flaky` job raises, and every job that succeeds writes ``DASH_DIR/done-<n>``.
"""

from __future__ import annotations

import os
from pathlib import Path

from jobbridge import Job, JobContext
from jobbridge.app import JobBridge
from jobbridge.drivers.throughput_port import throughput_of
from jobbridge.envelope import Envelope
from jobbridge.settings import Settings


def folder() -> Path:
    return Path(os.environ["DASH_DIR"])


class Flaky(Job, name="dash.flaky", queue="default", tries=1):
    n: int

    def handle(self, ctx: JobContext) -> None:
        if (folder() / "failing").exists():
            raise ValueError(f"flaky job {self.n} could not reach the mail server")
        (folder() / f"done-{self.n}").write_text("ok")


class Parked(Job, name="dash.parked", queue="parked"):
    """Dispatched to a queue no worker works, so the overview shows it waiting."""

    def handle(self, ctx: JobContext) -> None:
        pass


def number_of(body: bytes) -> int:
    """A stored `Flaky` job's ``n``."""
    return int(Envelope.decode(body).payload["n"])


__all__ = ["Flaky", "Parked", "make_bridge", "number_of", "throughput_of"]


def settings() -> Settings:
    url = os.environ["DASH_STORE"]
    if url.startswith("redis"):
        return Settings.from_mapping({"driver": "redis", "redis_url": url, "redis_prefix": os.environ["DASH_PREFIX"]})
    return Settings.from_mapping({"driver": "database", "database_url": url})


def make_bridge() -> JobBridge:
    return JobBridge(settings(), jobs=[Flaky, Parked])
