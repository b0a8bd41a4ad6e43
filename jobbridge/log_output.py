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
from typing import TextIO

#: the worker's line: time, level, process id, logger name, message
LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
#: how long the writer lets lines gather after the first one of a batch (seconds)
FLUSH_INTERVAL = 0.05
#: characters per write: at most the size of a pipe write the kernel keeps whole (PIPE_BUF on Linux)
CHUNK = 4096
#: queued lines beyond which the logging thread writes them itself
MAX_PENDING = 20_000

_handlers: weakref.WeakSet[BatchedStreamHandler] = weakref.WeakSet()


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
        second, text = self._second  # one tuple, read and replaced whole: safe across threads
        if second != int(record.created):
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (int(record.created), text)
        return self.default_msec_format % (text, record.msecs)


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


def _reset_after_fork() -> None:
    for handler in list(_handlers):
        handler._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
