"""An attempt's log line: ``name=... job_id=... outcome=...``, one per attempt, never the payload.

Its own module (out of `jobbridge.execution`, which decides the outcome) because
the line is written on every attempt and has its own fast path
(`jobbridge.log_output.plain_handler`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from jobbridge.envelope import Envelope
from jobbridge.log_output import plain_handler
from jobbridge.outcome import Outcome

log = logging.getLogger("jobbridge.job")


def log_attempt(env: Envelope, outcome: Outcome) -> None:
    """One line per attempt; never the payload.

    When jobbridge's own handler is the only thing the record would reach
    (`jobbridge.log_output.plain_handler`), it writes the line without a
    record: the same text, a third of the cost (docs/benchmarks.md). Else the
    record is the one ``log.log(level, text, extra={"jobbridge": fields})``
    makes, without that call's walk up the stack for the caller (this function,
    read from its own frame) and its check of each ``extra`` key.
    """
    level = logging.INFO if outcome.action == "acknowledge" else logging.WARNING
    if not log.isEnabledFor(level):  # at -l warning a retry's or a failure's line is still written
        return
    text = (f"name={env.name} job_id={env.id} queue={env.queue} attempt={env.attempts} "
            f"duration_ms={outcome.duration_ms} outcome={outcome.label}")
    retry_in = round(outcome.delay, 3) if outcome.action == "release" else None
    if retry_in is not None:
        text += f" retry_in={retry_in}"
    error = outcome.error.split("\n", 1)[0] if outcome.error else None
    if error is not None:
        text += f" error={error}"
    handler = plain_handler(log, level)
    if handler is not None and handler.write_plain(level, log.name, text):
        return
    fields: dict[str, Any] = {
        "name": env.name, "job_id": env.id, "queue": env.queue, "attempt": env.attempts,
        "duration_ms": outcome.duration_ms, "outcome": outcome.label,
    }
    if retry_in is not None:
        fields["retry_in"] = retry_in
    if error is not None:
        fields["error"] = error
    here = sys._getframe()
    record = log.makeRecord(log.name, level, here.f_code.co_filename, here.f_lineno, text, (), None,
                            here.f_code.co_name)
    record.jobbridge = fields  # what extra={"jobbridge": fields} sets
    log.handle(record)
