"""The per-attempt line without a record (`jobbridge.log_output.plain_handler`, ``write_plain``).

The line written directly must be byte for byte the line the record path
writes (and `logging.Formatter` with `LOG_FORMAT` would write) at the same
moment; the direct path must be taken only when jobbridge's handler is all the
record would meet, and anything an app configures (a handler, a filter, a
record factory, a formatter of its own, a hook on `logging.Logger`) must get
the record as before, with its ``jobbridge`` fields.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from jobbridge import log_output
from jobbridge.envelope import Envelope, Reservation
from jobbridge.execution import _log_attempt
from jobbridge.execution import log as job_log
from jobbridge.log_output import LOG_FORMAT, BatchedStreamHandler, LineFormatter, plain_handler
from jobbridge.outcome import Outcome
from tests.worker.test_log_output import Writes

#: moments at the start, the middle and the last millisecond of a second
MOMENTS_NS = (1_764_600_000_000_000_000, 1_764_600_000_499_999_999, 1_764_600_000_999_500_000,
              1_764_600_000_999_999_999, 1_764_600_001_001_000_000)
OUTCOMES = {
    "acknowledge": ("succeeded", {}),
    "release": ("released", {"delay": 2.5, "error": "ValueError: no\nTraceback ..."}),
    "fail": ("failed", {"error": "KeyError: 'x'"}),
}


@dataclass
class Root:
    """The root logger as a worker has it: jobbridge's handler alone, at INFO."""

    handler: BatchedStreamHandler
    stream: Writes

    def lines(self) -> list[str]:
        self.handler.flush()
        return self.stream.lines()


@contextlib.contextmanager
def worker_root() -> Iterator[Root]:
    """The root logger without pytest's handlers, with jobbridge's alone, at INFO; restored after.

    Entered in the test's body: pytest adds its capture handlers to the root
    logger at the start of each phase, after the fixtures are set up.
    """
    logger = logging.getLogger()
    saved, level, job_level = logger.handlers[:], logger.level, job_log.level
    stream = Writes()
    handler = BatchedStreamHandler(stream, interval=60.0)
    handler.setFormatter(LineFormatter())
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    job_log.setLevel(logging.NOTSET)
    try:
        yield Root(handler, stream)
    finally:
        logger.handlers[:] = saved
        logger.setLevel(level)
        job_log.setLevel(job_level)
        handler.close()


def frozen(monkeypatch: pytest.MonkeyPatch, ns: int) -> None:
    """Every clock `logging.LogRecord` and the direct line read says ``ns``."""
    monkeypatch.setattr(time, "time_ns", lambda: ns)
    monkeypatch.setattr(time, "time", lambda: ns / 1e9)


def attempt(action: str) -> tuple[Envelope, Outcome]:
    label, extra = OUTCOMES[action]
    env = Envelope.new("blog.notify", "mail", {}, tries=3, timeout=60, now=time.time()).replace(attempts=2)
    return env, Outcome(Reservation(env, None, 0.0), action, label, duration_ms=1.25, **extra)  # type: ignore[arg-type]


class Records(logging.Handler):
    """An app's handler: keeps every record it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def by_record_path(root: Root, env: Envelope, outcome: Outcome) -> tuple[str, logging.LogRecord]:
    """The line and the record when the record is made (a filter that passes everything forces it)."""
    seen: list[logging.LogRecord] = []

    def keep(record: logging.LogRecord) -> bool:
        seen.append(record)
        return True

    root.handler.addFilter(keep)
    try:
        _log_attempt(env, outcome)
    finally:
        root.handler.removeFilter(keep)
    (record,) = seen
    return root.lines()[-1], record


@pytest.mark.parametrize("ns", MOMENTS_NS)
@pytest.mark.parametrize("action", OUTCOMES)
def test_the_line_without_a_record_is_the_line_the_record_gives(monkeypatch: pytest.MonkeyPatch, action: str,
                                                               ns: int) -> None:
    env, outcome = attempt(action)
    level = logging.INFO if action == "acknowledge" else logging.WARNING
    with worker_root() as root:
        frozen(monkeypatch, ns)
        assert plain_handler(job_log, level) is root.handler  # the direct path is the one taken
        _log_attempt(env, outcome)
        direct = root.lines()[-1]
        through_record, record = by_record_path(root, env, outcome)
        monkeypatch.undo()
        lines, writes = root.lines(), root.stream.writes
    assert direct == through_record
    assert direct == logging.Formatter(LOG_FORMAT).format(record)  # what logging itself writes
    assert f" [{os.getpid()}] jobbridge.job: name=blog.notify job_id={env.id} queue=mail attempt=2 " in direct
    assert len(lines) == 2 and all(w.endswith("\n") for w in writes)


def test_a_converter_or_time_format_set_on_the_formatter_is_honoured_on_both_paths(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env, outcome = attempt("acknowledge")
    with worker_root() as root:
        formatter = root.handler.formatter
        assert isinstance(formatter, LineFormatter)
        formatter.converter = time.gmtime  # type: ignore[method-assign]
        formatter.default_time_format = "%d/%m/%Y %H:%M:%S"
        frozen(monkeypatch, MOMENTS_NS[1])
        assert plain_handler(job_log, logging.INFO) is root.handler
        _log_attempt(env, outcome)
        direct = root.lines()[-1]
        through_record = by_record_path(root, env, outcome)[0]
        monkeypatch.undo()
    assert direct.startswith("01/12/2025 14:40:00,") and direct == through_record  # gmtime, that format


def test_a_handler_the_app_adds_gets_the_record_with_its_fields_and_the_line_is_unchanged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env, outcome = attempt("release")
    app = Records()
    with worker_root() as root:
        frozen(monkeypatch, MOMENTS_NS[2])
        _log_attempt(env, outcome)
        alone = root.lines()[-1]
        logging.getLogger().addHandler(app)
        assert plain_handler(job_log, logging.WARNING) is None
        _log_attempt(env, outcome)
        beside = root.lines()[-1]
        monkeypatch.undo()
    assert beside == alone
    (record,) = app.records
    assert record.name == "jobbridge.job" and record.levelno == logging.WARNING
    assert record.funcName == "log_attempt" and record.pathname.endswith(os.path.join("jobbridge", "attempt_log.py"))
    assert record.jobbridge == {  # type: ignore[attr-defined]
        "name": "blog.notify", "job_id": env.id, "queue": "mail", "attempt": 2, "duration_ms": 1.25,
        "outcome": "released", "retry_in": 2.5, "error": "ValueError: no"}


def _filter_on_logger(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_log, "filters", [lambda record: True])


def _handler_on_parent(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging.getLogger("jobbridge"), "handlers", [Records()])


def _second_root_handler(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    logging.getLogger().addHandler(Records())


def _handler_subclass(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    class Mine(BatchedStreamHandler):
        pass

    mine = Mine(root.stream, interval=60.0)
    mine.setFormatter(LineFormatter())
    logging.getLogger().handlers[:] = [mine]


def _handler_level(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    root.handler.setLevel(logging.ERROR)


def _other_format(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    root.handler.setFormatter(LineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))


def _date_format(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    root.handler.setFormatter(LineFormatter(LOG_FORMAT, "%H:%M:%S"))


def _formatter_subclass(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    class Mine(LineFormatter):
        pass

    root.handler.setFormatter(Mine())


def _msec_format(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LineFormatter, "default_msec_format", "%s.%03d")


def _record_factory(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    factory = logging.getLogRecordFactory()
    monkeypatch.setattr(logging, "_logRecordFactory", lambda *a, **k: factory(*a, **k))


def _hook_on_call_handlers(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    original = logging.Logger.callHandlers
    monkeypatch.setattr(logging.Logger, "callHandlers", lambda self, record: original(self, record))


def _no_process_ids(root: Root, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging, "logProcesses", False)


@pytest.mark.parametrize("configure", [
    _filter_on_logger, _handler_on_parent, _second_root_handler, _handler_subclass, _handler_level, _other_format,
    _date_format, _formatter_subclass, _msec_format, _record_factory, _hook_on_call_handlers, _no_process_ids,
], ids=lambda f: f.__name__.strip("_"))
def test_anything_else_configured_takes_the_record_path(monkeypatch: pytest.MonkeyPatch,
                                                        configure: Callable[[Root, pytest.MonkeyPatch], None]) -> None:
    with worker_root() as root:
        assert plain_handler(job_log, logging.INFO) is root.handler
        configure(root, monkeypatch)
        found = plain_handler(job_log, logging.INFO)
        monkeypatch.undo()
    assert found is None


def test_at_warning_a_retry_and_a_failure_are_still_written_and_a_success_is_not() -> None:
    with worker_root() as root:
        logging.getLogger().setLevel(logging.WARNING)  # the worker's -l warning
        for action in OUTCOMES:
            _log_attempt(*attempt(action))
        lines = root.lines()
    assert [line.split(" outcome=")[1].split()[0] for line in lines] == ["released", "failed"]
    assert all(" WARNING [" in line for line in lines)


def test_a_logger_that_does_not_propagate_reaches_no_handler_and_writes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_log, "propagate", False)
    monkeypatch.setattr(logging, "lastResort", None)
    with worker_root() as root:
        assert plain_handler(job_log, logging.INFO) is None
        _log_attempt(*attempt("acknowledge"))
        assert root.lines() == []


def test_a_line_that_cannot_be_made_takes_the_record_path_which_reports_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(seconds: float | None = None) -> time.struct_time:
        raise OverflowError("no such time")

    with worker_root() as root:
        formatter = root.handler.formatter
        assert isinstance(formatter, LineFormatter)
        monkeypatch.setattr(formatter, "converter", broken)
        _log_attempt(*attempt("acknowledge"))
        assert root.lines() == []
    assert "--- Logging error ---" in capsys.readouterr().err  # as the record path has always reported it


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_writes_its_own_process_id() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what the direct line would say, then leave without pytest's cleanup
        try:
            os.write(write, f"{log_output._pid} {os.getpid()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        said, actual = answer.read().split()
    os.waitpid(pid, 0)
    assert said == actual and int(said) != os.getpid()


def test_the_time_is_read_as_this_python_s_log_record_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    formatter = LineFormatter()
    for ns in MOMENTS_NS:
        frozen(monkeypatch, ns)
        record = logging.makeLogRecord({})
        record.__init__("x", logging.INFO, "f.py", 1, "m", (), None)  # type: ignore[misc]  # read the frozen clock
        assert formatter.plain_stamp() == logging.Formatter().formatTime(record), (ns, sys.version_info)
