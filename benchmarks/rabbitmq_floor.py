"""The broker's floor under the RabbitMQ table: what a bare py-amqp client gets from the same node, in the same run.

The targets of issue 15 (``dispatch_many`` at 30,000 jobs/s, dispatch-to-start
under 1 ms) are partly the broker's work, which no client can make cheaper: a
quorum queue writes each message to its log and fsyncs it before it confirms or
delivers it. So beside the libraries, on a vhost of its own (``jbbench-floor``),
a client with no job library at all measures:

- **publishing**: ``--jobs`` messages of a jobbridge job's size and properties,
  encoded *before* the clock starts, written 500 to a socket write and confirmed
  (publisher confirms, at most 4,000 unconfirmed), to a quorum queue and to a
  classic one: the most ``dispatch_many`` could reach over one connection if
  building its jobs cost nothing;
- **latency**: one persistent message at a time, from just before its publish
  until a consumer on another connection, in another process, has it: on a
  quorum queue with a confirm awaited (what jobbridge guarantees), on a classic
  queue with one, and on a classic queue without (what Dramatiq does by default);
  and beside them the fsync of a small write to a file on this machine's temporary
  directory, since a quorum queue confirms and delivers a message only once its log
  write is on disk (on a machine with one disk, the disk RabbitMQ writes to).
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import amqp
from amqp import spec

from benchmarks import vhosts
from benchmarks.common import Options
from benchmarks.report import LatencyRow, Row
from jobbridge.drivers.amqp.frames import CONTENT_TYPE, PublishFrames

LIBRARY = "py-amqp (bare)"
#: a no-op job's body as jobbridge stores it (the size is what matters to the broker)
BODY = (b'{"v":1,"id":"01a23208-35d0-7576-9bd7-5539f12f9816","name":"bench.noop","queue":"default","payload":{},'
        b'"tries":3,"timeout":600.0,"available_at":1796135814.6993937,"created_at":1796135814.6993937,'
        b'"attempts":0,"unique_key":null,"unique_for":null,"headers":{}}')
BATCH, IN_FLIGHT = 500, 4000


def _connect(url: str) -> amqp.Connection:
    parts = urlsplit(url)
    conn = amqp.Connection(f"{parts.hostname}:{parts.port or 5672}", userid=parts.username or "guest",
                           password=parts.password or "guest", virtual_host=parts.path.lstrip("/") or "/")
    conn.connect()
    return conn


@contextlib.contextmanager
def _channel(url: str, queue: str, kind: str, *, confirms: bool) -> Iterator[tuple[Any, Any]]:
    conn = _connect(url)
    try:
        ch = conn.channel()
        ch.queue_declare(queue, durable=True, auto_delete=False, arguments={"x-queue-type": kind})
        if confirms:
            ch.confirm_select()
        yield conn, ch
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def publish_rate(url: str, kind: str, count: int) -> Row:
    """``count`` pre-encoded persistent messages published with confirms to a ``kind`` queue; seconds to the last."""
    queue = f"floor-{kind}"
    with _channel(url, queue, kind, confirms=True) as (conn, ch):
        confirmed = [0]

        def ack(tag: int, multiple: bool) -> None:
            confirmed[0] = max(confirmed[0], tag)  # one queue: the broker confirms in order

        ch.events["basic_ack"].add(ack)
        frames = PublishFrames(ch.channel_id, conn.frame_max)
        batches = [b"".join(frames.encode("", queue, BODY, f"job-{i:09d}") for i in range(start, min(start + BATCH,
                                                                                                       count)))
                   for start in range(0, count, BATCH)]
        start = time.perf_counter()
        sent = 0
        for data in batches:
            conn.transport.write(data)
            sent = min(count, sent + BATCH)
            _drain(conn, 0)
            while sent - confirmed[0] > IN_FLIGHT:
                _drain(conn, 5.0)
        while confirmed[0] < count:
            _drain(conn, 5.0)
        seconds = time.perf_counter() - start
        ch.queue_purge(queue)
    return Row(LIBRARY, "enqueue-batch", f"enqueue, batch: {kind} queue", count, seconds,
               note="messages encoded before the clock starts, confirmed: the broker's ceiling for one connection")


def _drain(conn: Any, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        conn.drain_events(timeout=timeout)
        while True:
            conn.drain_events(timeout=0)


def latency(url: str, kind: str, *, confirms: bool, opts: Options) -> LatencyRow:
    """Publish one message at a time; the time until a consumer in another process has it."""
    queue = f"floor-latency-{kind}"
    label = f"{kind} queue, {'confirmed' if confirms else 'no confirms'}"
    row = LatencyRow(LIBRARY, label)
    with _channel(url, queue, kind, confirms=confirms) as (_conn, ch):
        child = subprocess.Popen([sys.executable, "-m", "benchmarks.rabbitmq_floor", url, queue],
                                 stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
        try:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                row.error = "the consumer did not start"
                return row
            budget_end = time.monotonic() + opts.latency_budget
            for _ in range(opts.latency_samples):
                if time.monotonic() > budget_end:
                    row.note = f"sampling stopped at the {opts.latency_budget:g}s budget"
                    break
                time.sleep(random.uniform(0.005, 0.025))
                message = amqp.Message(BODY, delivery_mode=2, content_type=CONTENT_TYPE)
                sent = time.time()
                ch.basic_publish(message, "", queue, mandatory=True)
                if confirms:
                    ch.wait([spec.Basic.Ack, spec.Basic.Nack], timeout=5.0)
                row.samples.append(float(child.stdout.readline()) - sent)
        finally:
            child.terminate()
            child.wait(10)
    return row


def fsync_latency(samples: int) -> LatencyRow:
    """A message's worth of bytes appended to a file and fsynced, ``samples`` times: what a log write waits for."""
    row = LatencyRow("disk", f"fsync of a {len(BODY)}-byte write", note=f"a file in {tempfile.gettempdir()}")
    fd, path = tempfile.mkstemp(prefix="jb-bench-fsync-")
    try:
        for _ in range(samples):
            os.write(fd, BODY)
            start = time.perf_counter()
            os.fsync(fd)
            row.samples.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)
    return row


def consume(url: str, queue: str) -> None:
    """The consumer process: print the moment each message arrives (``time.time()``), then acknowledge it."""
    conn = _connect(url)
    ch = conn.channel()
    ch.basic_qos(0, 8, False)

    def arrived(message: Any) -> None:
        print(repr(time.time()), flush=True)
        ch.basic_ack(message.delivery_tag)

    ch.basic_consume(queue, callback=arrived)
    print("ready", flush=True)
    while True:
        conn.drain_events()


def run(opts: Options) -> tuple[list[Row], list[LatencyRow]]:
    """Every floor figure, on a vhost made for them and deleted after."""
    vhosts.fresh_vhost("floor")
    url = vhosts.amqp_url("floor")
    rows: list[Row] = []
    lat: list[LatencyRow] = []
    try:
        for kind in ("quorum", "classic"):
            try:
                rows.append(publish_rate(url, kind, opts.jobs))
            except Exception as exc:
                rows.append(Row(LIBRARY, "enqueue-batch", f"enqueue, batch: {kind} queue", error=repr(exc)[:200]))
        for kind, confirms in (("quorum", True), ("classic", True), ("classic", False)):
            try:
                lat.append(latency(url, kind, confirms=confirms, opts=opts))
            except Exception as exc:
                lat.append(LatencyRow(LIBRARY, f"{kind} queue", error=repr(exc)[:200]))
        lat.append(fsync_latency(opts.latency_samples))
    finally:
        vhosts.drop_vhost("floor")
    return rows, lat


if __name__ == "__main__":
    consume(sys.argv[1], sys.argv[2])
