"""The worker's default log output (jobbridge.log_output) and the per-attempt line.

In-process: the formatter writes what `logging.Formatter` writes, the batched
handler writes every line whole and in order, flushes and closes without
losing one, stays bounded. In real ``jobbridge worker`` processes: as many
``jobbridge.job`` lines as attempts, whether the worker drains and exits or is
stopped by SIGTERM or Ctrl-C, none after the summary, none cut by another
process's; and an app that configures logging itself gets every record as
before, with its fields.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobbridge import JobBridge, log_output, signals
from jobbridge.cli.working import configure_logging
from jobbridge.envelope import Envelope, Reservation
from jobbridge.execution import _log_attempt
from jobbridge.log_output import CHUNK, LOG_FORMAT, BatchedStreamHandler, LineFormatter, install_default_handler
from jobbridge.outcome import Outcome
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from tests.worker.log_app import Tick

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
JOB_LINE = re.compile(
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO \[\d+\] jobbridge\.job: name=logapp\.tick job_id=[0-9a-f-]{36} "
    r"queue=default attempt=1 duration_ms=\d+(\.\d+)? outcome=succeeded$")
SUMMARY = re.compile(r"Processed (\d+) job attempt\(s\): (\d+) succeeded")


class Writes(io.StringIO):
    """A stream that keeps each write apart, so a test can see how the text was cut."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []
        self.guard = threading.Lock()

    def write(self, text: str) -> int:
        with self.guard:
            self.writes.append(text)
        return len(text)

    def lines(self) -> list[str]:
        return "".join(self.writes).splitlines()


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    """A logger of the test's own, not propagating, so pytest's capture and the root logger stay out of it."""
    made = logging.getLogger(f"tests.log_output.{time.monotonic_ns()}")
    made.propagate = False
    made.setLevel(logging.INFO)
    yield made
    for handler in made.handlers[:]:
        made.removeHandler(handler)
        handler.close()


def attach(logger: logging.Logger, interval: float = 60.0) -> tuple[BatchedStreamHandler, Writes]:
    stream = Writes()
    handler = BatchedStreamHandler(stream, interval=interval)
    handler.setFormatter(LineFormatter())
    logger.handlers[:] = [handler]  # pytest's capture handlers out: the test reads the stream
    return handler, stream


# -- the formatter ---------------------------------------------------------------------------------


def test_the_line_formatter_writes_what_logging_formatter_writes() -> None:
    ours, theirs = LineFormatter(LOG_FORMAT), logging.Formatter(LOG_FORMAT)
    start = time.time()
    for step in range(0, 3000, 7):  # three seconds of records, each second's first and last milliseconds
        record = logging.makeLogRecord({"name": "jobbridge.job", "msg": "x=%s", "args": (step,),
                                        "levelno": logging.INFO, "levelname": "INFO"})
        record.created = start + step / 1000
        record.msecs = int((record.created - int(record.created)) * 1000) + 0.0
        assert ours.format(record) == theirs.format(record)


def test_the_line_formatter_honours_a_date_format_and_an_exception() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("x").makeRecord("x", logging.ERROR, "f.py", 1, "failed", (), sys.exc_info())
    assert LineFormatter("%(asctime)s %(message)s", "%H:%M").format(record) == \
        logging.Formatter("%(asctime)s %(message)s", "%H:%M").format(record)
    assert "ValueError: boom" in LineFormatter().format(record)


# -- the handler -----------------------------------------------------------------------------------


def test_lines_from_many_threads_are_all_written_whole_in_each_threads_order(logger: logging.Logger) -> None:
    handler, stream = attach(logger, interval=0.01)

    def log_some(thread: int) -> None:
        for n in range(2000):
            logger.info("thread=%d n=%d %s", thread, n, "x" * (n % 300))

    threads = [threading.Thread(target=log_some, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    handler.flush()
    lines = stream.lines()
    assert len(lines) == 16_000
    seen: dict[str, list[int]] = {}
    for line in lines:
        match = re.search(r"thread=(\d) n=(\d+) (x*)$", line)
        assert match, line
        seen.setdefault(match[1], []).append(int(match[2]))
        assert len(match[3]) == int(match[2]) % 300
    assert all(order == list(range(2000)) for order in seen.values()) and len(seen) == 8
    assert all(w.endswith("\n") and len(w) <= CHUNK for w in stream.writes)  # whole lines, one pipe write each
    assert len(stream.writes) < len(lines) / 5  # batched: never a write per line


def test_lines_wait_for_the_writer_and_flush_writes_them_in_order(logger: logging.Logger) -> None:
    handler, stream = attach(logger, interval=60.0)
    for n in range(10):
        logger.info("line %d", n)
    assert stream.writes == []  # the writer waits for more; nothing was lost, it is queued
    handler.flush()
    assert [line.rsplit(" ", 1)[1] for line in stream.lines()] == [str(n) for n in range(10)]


def test_close_writes_what_is_queued_and_a_record_after_it_is_written_at_once(logger: logging.Logger) -> None:
    handler, stream = attach(logger, interval=60.0)
    logger.info("before close")
    handler.close()
    assert stream.lines()[-1].endswith("before close")
    logger.info("after close")
    assert stream.lines()[-1].endswith("after close")


def test_the_writer_writes_without_being_asked(logger: logging.Logger) -> None:
    _, stream = attach(logger, interval=0.01)
    logger.info("soon")
    deadline = time.monotonic() + DEADLINE
    while not stream.writes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stream.lines()[-1].endswith("soon")


def test_the_queue_is_bounded_by_writing_in_the_logging_thread(logger: logging.Logger,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_output, "MAX_PENDING", 100)
    _, stream = attach(logger, interval=60.0)
    for n in range(250):
        logger.info("line %d", n)
    assert len(stream.lines()) >= 200  # the writer slept through it: the logging thread wrote


def test_a_record_that_cannot_be_formatted_is_reported_and_the_rest_are_written(
        logger: logging.Logger, capsys: pytest.CaptureFixture[str]) -> None:
    handler, stream = attach(logger)
    logger.info("%d", "not a number")
    logger.info("fine")
    handler.flush()
    assert [line.rsplit(" ", 1)[1] for line in stream.lines()] == ["fine"]
    assert "--- Logging error ---" in capsys.readouterr().err


def test_a_filter_on_the_handler_is_honoured(logger: logging.Logger) -> None:
    handler, stream = attach(logger)
    handler.addFilter(lambda record: "secret" not in record.getMessage())
    logger.info("a secret")
    logger.info("public")
    handler.flush()
    assert len(stream.lines()) == 1 and stream.lines()[0].endswith("public")


def test_a_stream_that_fails_is_reported_never_raised(logger: logging.Logger,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    handler = BatchedStreamHandler(Full(), interval=60.0)
    logger.handlers[:] = [handler]
    logger.info("lost to a closed stream")
    handler.flush()
    err = capsys.readouterr().err
    assert "--- Logging error ---" in err and "No space left on device" in err


# -- installing it ---------------------------------------------------------------------------------


@contextlib.contextmanager
def bare_root() -> Iterator[logging.Logger]:
    """The root logger without pytest's handlers, as a fresh worker process has it; restored after."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    root.handlers.clear()
    try:
        yield root
    finally:
        for handler in root.handlers[:]:
            root.removeHandler(handler)
            handler.close()
        root.handlers[:] = saved
        root.setLevel(level)


def test_the_worker_installs_its_handler_on_a_root_logger_without_one() -> None:
    with bare_root() as root:
        configure_logging("INFO")
        (handler,) = root.handlers
        level = root.level
    assert isinstance(handler, BatchedStreamHandler) and isinstance(handler.formatter, LineFormatter)
    assert handler.formatter._fmt == LOG_FORMAT and level == logging.INFO


def test_a_root_logger_with_a_handler_is_left_alone_as_basic_config_leaves_it() -> None:
    own = logging.StreamHandler(io.StringIO())
    with bare_root() as root:
        root.addHandler(own)
        root.setLevel(logging.ERROR)
        assert not install_default_handler("INFO")
        configure_logging("INFO")
        assert root.handlers == [own] and root.level == logging.ERROR


def test_an_app_that_configures_logging_itself_gets_no_handler() -> None:
    def configure(sender: object, **kwargs: object) -> bool:
        return True

    signals.worker_configure_logging.connect(configure)
    try:
        with bare_root() as root:
            configure_logging("INFO")
            assert root.handlers == []
    finally:
        signals.worker_configure_logging.disconnect(configure)


# -- the per-attempt line --------------------------------------------------------------------------


def _outcome(action: str, label: str, **extra: object) -> tuple[Envelope, Outcome]:
    env = Envelope.new("blog.notify", "mail", {}, tries=3, timeout=60, now=time.time()).replace(attempts=2)
    return env, Outcome(Reservation(env, None, 0.0), action, label, duration_ms=1.25, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(("action", "label", "extra", "level", "tail"), [
    ("acknowledge", "succeeded", {}, logging.INFO, ""),
    ("release", "released", {"delay": 2.5, "error": "ValueError: no\nTraceback ..."}, logging.WARNING,
     " retry_in=2.5 error=ValueError: no"),
    ("fail", "failed", {"error": "KeyError: 'x'"}, logging.WARNING, " error=KeyError: 'x'"),
])
def test_the_attempt_line_says_what_it_always_said(caplog: pytest.LogCaptureFixture, action: str, label: str,
                                                   extra: dict[str, object], level: int, tail: str) -> None:
    env, outcome = _outcome(action, label, **extra)
    with caplog.at_level(logging.INFO, logger="jobbridge.job"):
        _log_attempt(env, outcome)
    (record,) = caplog.records
    assert record.name == "jobbridge.job" and record.levelno == level
    assert record.getMessage() == (f"name=blog.notify job_id={env.id} queue=mail attempt=2 duration_ms=1.25 "
                                   f"outcome={label}{tail}")
    fields = record.jobbridge  # type: ignore[attr-defined]
    assert fields["job_id"] == env.id and fields["outcome"] == label and fields["attempt"] == 2
    # where the record says it was logged from, as logging's own caller lookup would have said
    assert record.funcName == "log_attempt" and record.pathname.endswith(os.path.join("jobbridge", "attempt_log.py"))
    assert record.module == "attempt_log" and record.lineno > 0


# -- real worker processes -------------------------------------------------------------------------


class Store:
    """A SQLite store in the test's directory, and ``jobbridge worker`` processes on it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.url = f"sqlite:///{tmp / 'jobs.sqlite3'}"
        self.vars = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
        self.vars.update({"JOBBRIDGE_DATABASE_URL": self.url, "PYTHONUNBUFFERED": "1",
                          "LOG_APP_RECORDS": str(tmp / "records.jsonl")})
        self.bridge = JobBridge(Settings.from_mapping({"database_url": self.url}), jobs=[Tick])
        self.bridge.driver().migrate()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.output = tmp / "output.txt"

    def push(self, count: int, ms: float = 0) -> None:
        self.bridge.dispatch_many([Tick(ms=ms) for _ in range(count)])

    def worker(self, *args: str, app: str = "tests.worker.log_app:make_bridge") -> subprocess.Popen[bytes]:
        """Stdout and stderr into one file, as a terminal or journald shows them."""
        script = Path(sys.executable).with_name("jobbridge")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]
        with self.output.open("wb") as out:
            proc = subprocess.Popen([*command, "worker", "-A", app, "--sleep", "0.05", *args],
                                    cwd=REPO, env=self.vars, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def lines(self) -> list[str]:
        return self.output.read_text().splitlines()

    def job_lines(self) -> list[str]:
        return [line for line in self.lines() if " jobbridge.job: " in line]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.bridge.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    made = Store(tmp_path)
    yield made
    made.close()


def exited(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(DEADLINE)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"worker {proc.pid} did not exit") from None


def summary(store: Store) -> int:
    """The attempts the summary line reports; every attempt's line must come before it, none after."""
    lines = store.lines()
    at = [i for i, line in enumerate(lines) if SUMMARY.match(line)]
    assert at, f"no summary line; the output ends {lines[-3:]!r}"
    after = [line for line in lines[at[-1] + 1:] if " jobbridge.job: " in line]
    assert after == [], f"{len(after)} attempt line(s) after the summary, the first: {after[:1]!r}"
    match = SUMMARY.match(lines[at[-1]])
    assert match
    return int(match[1])


@pytest.mark.slow
def test_a_drained_worker_logs_one_line_per_attempt_and_the_summary_after_them(store: Store) -> None:
    store.push(3000)
    assert exited(store.worker("--stop-when-empty")) == 0
    lines = store.job_lines()
    assert len(lines) == 3000 == summary(store)
    assert all(JOB_LINE.match(line) for line in lines), next(line for line in lines if not JOB_LINE.match(line))


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_worker_stopped_by_a_signal_loses_no_line(store: Store, stop: signal.Signals) -> None:
    store.push(3000, ms=1)
    proc = store.worker()
    deadline = time.monotonic() + DEADLINE
    while len(store.job_lines()) < 100:
        assert time.monotonic() < deadline and proc.poll() is None, "the worker never logged an attempt"
        time.sleep(0.02)
    proc.send_signal(stop)
    assert exited(proc) == 0
    attempts = summary(store)
    assert len(store.job_lines()) == attempts
    assert pending(store.bridge.driver(), "default") == 3000 - attempts


@pytest.mark.slow
def test_worker_processes_sharing_stderr_never_cut_into_each_others_lines(store: Store) -> None:
    store.push(4000, ms=5)  # at least 2.5 s of work for one process alone: the other certainly starts within it
    assert exited(store.worker("--processes", "2", "--stop-when-empty")) == 0
    lines = store.job_lines()
    assert len(lines) == 4000 == summary(store)
    assert all(JOB_LINE.match(line) for line in lines), next(line for line in lines if not JOB_LINE.match(line))
    assert len({line.split("[", 1)[1].split("]", 1)[0] for line in lines}) == 2  # both processes logged


@pytest.mark.slow
def test_an_app_with_its_own_logging_gets_every_record_and_the_worker_adds_no_handler(store: Store) -> None:
    store.push(500)
    assert exited(store.worker("--stop-when-empty", app="tests.worker.log_app:make_bridge_with_own_logging")) == 0
    assert store.job_lines() == []  # the worker's handler was not installed
    records = [json.loads(line) for line in (store.tmp / "records.jsonl").read_text().splitlines()]
    assert len(records) == 500 == summary(store)
    assert all(r["outcome"] == "succeeded" and r["message"].startswith(f"name=logapp.tick job_id={r['job_id']} ")
               and r["funcName"] == "log_attempt" and r["thread"].startswith("jobbridge-worker")
               for r in records)
