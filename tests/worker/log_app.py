"""The app the log-output tests run in real ``jobbridge worker`` processes (tests/worker/test_log_output.py).

`make_bridge` leaves logging to the worker; `make_bridge_with_own_logging`
configures it first, as an app with its own logging setup does, with a handler
that writes each ``jobbridge.job`` record's fields to the file named by
``LOG_APP_RECORDS``.
"""

from __future__ import annotations

import json
import logging
import os
import time

from jobbridge import Job, JobBridge, JobContext


class Tick(Job, name="logapp.tick"):
    """Sleeps ``ms`` milliseconds (0: a no-op), so a stop signal can land while jobs are running."""

    ms: float = 0

    def handle(self, ctx: JobContext) -> None:
        if self.ms:
            time.sleep(self.ms / 1000)


class FieldsAsJson(logging.Formatter):
    """An app's own formatter: the attempt's fields, as the record carries them, and the message."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps({"message": record.getMessage(), "thread": record.threadName,
                           "funcName": record.funcName, **getattr(record, "jobbridge", {})})


def make_bridge() -> JobBridge:
    """Settings from the environment (JOBBRIDGE_DATABASE_URL names the SQLite file)."""
    return JobBridge.from_env(jobs=[Tick])


def make_bridge_with_own_logging() -> JobBridge:
    """The same app, having configured logging itself before the worker looks."""
    handler = logging.FileHandler(os.environ["LOG_APP_RECORDS"], encoding="utf-8")
    handler.addFilter(lambda record: hasattr(record, "jobbridge"))
    handler.setFormatter(FieldsAsJson())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return make_bridge()
