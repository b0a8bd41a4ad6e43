"""The worker's default log output: lines formatted where they are logged, written by one thread in batches.

At INFO a worker logs one line per attempt from each of its job threads. Through
a plain `logging.StreamHandler` every line is a lock that the job threads queue
on and a ``write`` system call made while holding it; at 15,000 jobs a second
that costs more than the jobs (docs/benchmarks.md has the profile). The
handler here keeps the standard API and the line's text, and changes only how
the text reaches the stream:

- each record is formatted in the thread that logged it, as `logging.StreamHandler`
  does, so a message's arguments are read when they are logged, never later;
- the line is appended to a queue without taking the handler's lock (a deque's
  append is atomic), and one writer thread, woken by the first line of a
  batch, waits `FLUSH_INTERVAL` and writes what has gathered in chunks of
  whole lines, each chunk one ``write`` of at most `CHUNK` characters (under
  the pipe's atomic size, so the lines of several worker processes sharing
  stderr never cut into one another);
- `flush` writes everything queued, in the calling thread, in order; the
  worker calls it before its summary and before it exits or re-executes, and
  `logging.shutdown` (at interpreter exit) calls it and `close`, so a stop by
  SIGTERM or Ctrl-C loses no line. Only a process killed outright (SIGKILL) can
  lose the lines of its last `FLUSH_INTERVAL`;
- when `MAX_PENDING` lines are queued (the stream is slower than the worker),
  the logging thread writes them itself, as a plain handler would, so memory
  stays bounded.

Only the handler jobbridge installs when the root logger has none changes:
records still go through loggers, levels, filters and whatever handlers an app
configures itself (``logging.config``, Django's ``LOGGING``, the facade's
``setup_logging``).

The per-attempt line has a shorter way still (`plain_handler`): when the only
handler a record of its logger would reach is this one, with the worker's own
line format and no filter anywhere it would pass, and nothing in `logging` is
replaced (the record factory, `logging.Logger`'s methods), no record is made at
all: the handler writes the text `LineFormatter` would have made from it
(`BatchedStreamHandler.write_plain`). Nothing could have seen the record, so
nothing is missed; anything else configured, and the line takes the record path.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from typing import Any, TextIO

#: the worker's line: time, level, process id, logger name, message
LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
#: how long the writer lets lines gather after the first one of a batch (seconds)
FLUSH_INTERVAL = 0.05
#: characters per write: at most the size of a pipe write the kernel keeps whole (PIPE_BUF on Linux)
CHUNK = 4096
#: queued lines beyond which the logging thread writes them itself
MAX_PENDING = 20_000

_handlers: weakref.WeakSet[BatchedStreamHandler] = weakref.WeakSet()
#: `logging.Formatter`'s milliseconds format, the one `LineFormatter.plain_stamp` writes
_DEFAULT_MSEC_FORMAT = "%s,%03d"
#: what that format appends for each millisecond (an index is cheaper than formatting the number)
_MILLIS = tuple(f",{ms:03d}" for ms in range(1000))


class LineFormatter(logging.Formatter):
    """`logging.Formatter` with the default timestamp computed once per second instead of once per line.

    ``time.strftime`` is most of what formatting a short line costs; the text it
    gives changes once a second, so it is kept, and the milliseconds appended.
    A ``datefmt`` is honoured through the standard path.
    """

    def __init__(self, fmt: str | None = LOG_FORMAT, datefmt: str | None = None) -> None:
        super().__init__(fmt, datefmt)
        self._second: tuple[int, str] = (-1, "")
        self._uses_time = self.usesTime()
        style = self._style
        plain = (type(style) is logging.PercentStyle and style._fmt == LOG_FORMAT
                 and not getattr(style, "_defaults", None))
        #: the style, when it is `LOG_FORMAT`'s: `is_plain` compares it with the one the formatter has now
        self._plain_style = style if plain else None

    def is_plain(self) -> bool:
        """Whether this formatter makes `LOG_FORMAT`'s line with the default timestamp (`plain_stamp`'s)."""
        return (self._style is self._plain_style and self.datefmt is None
                and self.default_msec_format == _DEFAULT_MSEC_FORMAT)

    if sys.version_info >= (3, 13):
        def plain_stamp(self) -> str:
            """The timestamp of a record made now, read as `logging.LogRecord` reads the time (Python 3.13+)."""
            ct = time.time_ns()
            created, msecs = ct / 1e9, (ct % 1_000_000_000) // 1_000_000
            if msecs == 999 and int(created) != ct // 1_000_000_000:  # the float rounded up to the next second
                msecs = 0
            second, text = self._second
            if second != int(created):
                text = self._second_text(created)
            return text + _MILLIS[msecs]
    else:
        def plain_stamp(self) -> str:
            """The timestamp of a record made now, read as `logging.LogRecord` reads the time (Python 3.11, 3.12)."""
            ct = time.time()
            whole = int(ct)
            second, text = self._second  # one tuple, read and replaced whole: safe across threads
            if second != whole:
                text = self._second_text(ct)
            return text + _MILLIS[int((ct - whole) * 1000)]

    def format(self, record: logging.LogRecord) -> str:
        """`logging.Formatter.format` in one step for a record without an exception or a stack."""
        if record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)
        record.message = record.getMessage()
        if self._uses_time:
            record.asctime = self.formatTime(record, self.datefmt)
        return self.formatMessage(record)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt or not self.default_msec_format:
            return super().formatTime(record, datefmt)
        return self.default_msec_format % (self._second_text(record.created), record.msecs)

    def _second_text(self, created: float) -> str:
        """The default time format's text for the second of ``created``, made once per second."""
        second, text = self._second  # one tuple, read and replaced whole: safe across threads
        if second != int(created):
            text = time.strftime(self.default_time_format, self.converter(created))
            self._second = (int(created), text)
        return text


class BatchedStreamHandler(logging.StreamHandler[TextIO]):
    """A `logging.StreamHandler` whose writes are made by one thread, in batches (the module says why)."""

    def __init__(self, stream: TextIO | None = None, interval: float = FLUSH_INTERVAL) -> None:
        super().__init__(stream)
        self.interval = interval
        self._lines: deque[str] = deque()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._writing = threading.Lock()  # one drain at a time: lines leave in the order they came
        self._starting = threading.Lock()
        self._writer: threading.Thread | None = None
        # plain flags, read on every line (cheaper than Event.is_set): the writer waits for a line; closed
        self._idle = True
        self._closed = False
        _handlers.add(self)

    def handle(self, record: logging.LogRecord) -> bool:
        """Filter, then emit without the handler's lock: `emit` only formats and appends."""
        rv: object = self.filter(record)
        if isinstance(rv, logging.LogRecord):  # Python 3.12+: a filter may hand back a record
            record = rv
        if rv:
            self.emit(record)
        return bool(rv)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        self._queue(line)

    def write_plain(self, level: int, name: str, message: str) -> bool:
        """Queue the line a record of ``name`` at ``level`` with ``message`` gets, without making the record.

        For `plain_handler`'s answer only: the text is what `LineFormatter` makes
        of `LOG_FORMAT`, the time and process id read as `logging.LogRecord`
        reads them. False (nothing queued) if the text cannot be made: the
        caller then takes the record path, which reports the error as logging does.
        """
        formatter = self.formatter
        try:
            assert isinstance(formatter, LineFormatter)
            line = (f"{formatter.plain_stamp()} {logging.getLevelName(level)} [{_pid}] {name}: "
                    f"{message}{self.terminator}")
        except Exception:
            return False
        self._queue(line)
        return True

    def _queue(self, line: str) -> None:
        self._lines.append(line)
        if self._closed or len(self._lines) >= MAX_PENDING:
            self.flush()
        elif self._idle:  # the writer waits for the first line of a batch: this one
            self._idle = False
            self._start_writer()
            self._wake.set()

    def flush(self) -> None:
        """Write every queued line now, in this thread, then flush the stream."""
        with self._writing:
            batch = []
            try:
                while True:
                    batch.append(self._lines.popleft())
            except IndexError:
                pass
            if batch:
                self._write(batch)
            elif hasattr(self.stream, "flush"):
                with contextlib.suppress(Exception):
                    self.stream.flush()

    def close(self) -> None:
        """Stop the writer, write what is left, then close as `logging.StreamHandler` does."""
        self._closed = True
        self._closing.set()
        self._wake.set()
        writer = self._writer
        if writer is not None and writer is not threading.current_thread():
            writer.join(timeout=5.0)
        self.flush()
        super().close()

    def _start_writer(self) -> None:
        with self._starting:
            if self._writer is not None:
                return
            writer = threading.Thread(target=self._run, name="jobbridge-log-writer", daemon=True)
            try:
                writer.start()
            except RuntimeError:  # no new thread at interpreter shutdown: write in the logging thread
                self._closed = True
                self.flush()
                return
            self._writer = writer

    def _run(self) -> None:
        while not self._closing.is_set():
            self._wake.wait()
            self._closing.wait(self.interval)  # let a batch gather; close() cuts the wait short
            self._wake.clear()
            self._idle = True  # before the drain: a line queued after it wakes the writer again
            self.flush()

    def _write(self, batch: list[str]) -> None:
        chunk: list[str] = []
        size = 0
        for line in batch:
            if chunk and size + len(line) > CHUNK:
                self._write_text("".join(chunk))
                chunk, size = [], 0
            chunk.append(line)
            size += len(line)
        if chunk:
            self._write_text("".join(chunk))

    def _write_text(self, text: str) -> None:
        """One write and a flush; a failure (a closed stream, a full disk) is reported as logging reports one."""
        try:
            self.stream.write(text)
            self.stream.flush()
        except Exception:
            if logging.raiseExceptions and sys.stderr is not None:
                with contextlib.suppress(Exception):
                    sys.stderr.write("--- Logging error ---\n")
                    traceback.print_exc(file=sys.stderr)

    def _after_fork(self) -> None:
        """In a forked child: the parent writes the lines it queued; the child starts empty, without a writer."""
        self._lines = deque()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._writing = threading.Lock()
        self._starting = threading.Lock()
        self._writer = None
        self._idle, self._closed = True, False


def flush_log_output() -> None:
    """Write every line jobbridge's handlers hold; before a summary, an ``os._exit`` or an ``exec``."""
    for handler in list(_handlers):
        handler.flush()


def install_default_handler(level: str | int, fmt: str = LOG_FORMAT) -> bool:
    """What ``logging.basicConfig(level=level, format=fmt)`` does, with the batched handler; True if installed.

    As `logging.basicConfig`: nothing changes when the root logger has a handler
    already (the app configured logging itself).
    """
    root = logging.getLogger()
    if root.handlers:
        return False
    handler = BatchedStreamHandler()
    handler.setFormatter(LineFormatter(fmt))
    root.addHandler(handler)
    root.setLevel(level)
    return True


def plain_handler(logger: logging.Logger, level: int) -> BatchedStreamHandler | None:
    """The handler that may write a record's line itself (`BatchedStreamHandler.write_plain`), else None.

    A record of ``logger`` at ``level`` (which the caller has found enabled, so
    the logger is not disabled either) would reach that handler and no other,
    nothing would read it before (no filter on the logger, the standard record
    factory and `logging.Logger` methods), and the handler would pass it and
    format it as `LOG_FORMAT` (no filter, its level, a plain `LineFormatter`).
    Checked on every call, since an app may add a handler or a filter at any
    moment.
    """
    if (logger.filters or not logging.logProcesses or type(logger) is not logging.Logger
            or logging.getLogRecordFactory() is not logging.LogRecord or logging.Logger.handle is not _LOGGER_HANDLE
            or logging.Logger.callHandlers is not _CALL_HANDLERS):
        return None
    found: logging.Handler | None = None
    current: logging.Logger | None = logger
    while current is not None:  # the walk `Logger.callHandlers` makes
        handlers = current.handlers
        if handlers:
            if found is not None or len(handlers) > 1:
                return None
            found = handlers[0]
        current = current.parent if current.propagate else None
    if (type(found) is not BatchedStreamHandler or found.filters or level < found.level
            or type(found.formatter) is not LineFormatter or not found.formatter.is_plain()):
        return None
    return found


def _logging_own(method: Any) -> Any:
    """``method`` if it is `logging`'s own, else a value no method is: one replaced before this import
    (an error tracker's hook on ``callHandlers``) must keep seeing every record."""
    return method if getattr(method, "__module__", None) == "logging" else object()


_LOGGER_HANDLE, _CALL_HANDLERS = _logging_own(logging.Logger.handle), _logging_own(logging.Logger.callHandlers)
#: this process's id, as a record's ``process`` (one system call per line otherwise); set again after a fork
_pid = os.getpid()


def _reset_after_fork() -> None:
    global _pid
    _pid = os.getpid()
    for handler in list(_handlers):
        handler._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
