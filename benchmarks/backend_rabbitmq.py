"""``python -m benchmarks rabbitmq``: jobbridge on RabbitMQ beside Celery and Dramatiq on the same node (issue 15).

Each library gets a vhost of its own (`benchmarks.vhosts`), made at the start
and deleted at the end; jobbridge's failed store and locks sit in a PostgreSQL database of their own
(``jobbridge_bench_amqp``).
Processing at each library's default concurrency. jobbridge's queue is quorum
(its default), every push confirmed by the broker; Celery and Dramatiq use
classic queues and, by default, publish without confirms. Last, a bare py-amqp
client measures the broker's own floor on the same node (`benchmarks.rabbitmq_floor`).
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks import rabbitmq_floor, vhosts
from benchmarks.common import Options, ProbeServer, Runner, run_library
from benchmarks.report import LatencyRow, Row
from benchmarks.run_celery import CeleryAmqpRunner
from benchmarks.run_dramatiq import DramatiqAmqpRunner
from benchmarks.run_jobbridge import Config, JobbridgeRunner
from benchmarks.stores import AMQP_SHARED_DB, ensure_pg_database
from benchmarks.targets import Target

TITLE = "RabbitMQ"
JB = "jobbridge (amqp)"
JB_CLASSIC = "jobbridge (amqp, classic queues)"
#: what the benchmark app reads off an amqp:// URL's query to declare classic queues (benchmarks/apps/jobbridge_app.py)
CLASSIC_QUERY = "jb_queue_type=classic"
TARGETS = (
    Target("jobbridge processing vs Dramatiq, default concurrency", JB, "process-default", times="dramatiq",
           at_least=1.5),
    Target("jobbridge dispatch_many", JB, "enqueue-batch", at_least=30_000),
    Target("jobbridge latency p50", JB, "latency-p50", at_most=0.001),
)


class AmqpJobbridgeRunner(JobbridgeRunner):
    """jobbridge on its vhost: emptied by making the vhost again (its connections then reopen)."""

    def __init__(self, library: str, vhost: str, url: str, configs: list[Config], latency: str) -> None:
        super().__init__(library, url, configs, latency, clean=lambda: vhosts.fresh_vhost(vhost),
                         before=lambda: _prepare(vhost))
        self.vhost = vhost

    def close(self) -> None:
        super().close()
        vhosts.drop_vhost(self.vhost)


def _prepare(vhost: str) -> None:
    ensure_pg_database(AMQP_SHARED_DB)
    vhosts.fresh_vhost(vhost)


def jobbridge_runner() -> JobbridgeRunner:
    return AmqpJobbridgeRunner(
        JB, "jobbridge", vhosts.amqp_url("jobbridge"),
        [Config("process-default", "process, default (1 process x 8 threads)")], latency="process-default")


def jobbridge_classic_runner() -> JobbridgeRunner:
    """The same worker on classic queues (``queue_type = "classic"``), the queue type Celery and Dramatiq use."""
    return AmqpJobbridgeRunner(
        JB_CLASSIC, "jobbridge-classic", vhosts.amqp_url("jobbridge-classic") + "?" + CLASSIC_QUERY,
        [Config("process-default", "process, default (1 process x 8 threads)")], latency="process-default")


PEERS: tuple[tuple[str, Callable[[], Runner]], ...] = (
    (JB, jobbridge_runner),
    (JB_CLASSIC, jobbridge_classic_runner),
    ("celery", CeleryAmqpRunner),
    ("dramatiq", DramatiqAmqpRunner),
)


def run(probe: ProbeServer, opts: Options, only: set[str] | None) -> tuple[list[Row], list[LatencyRow]]:
    rows: list[Row] = []
    latency: list[LatencyRow] = []
    for library, make in PEERS:
        if only and library.split()[0] not in only:
            continue
        got, lat = run_library(make, library, probe, opts)
        rows += got
        latency += [lat] if lat else []
    if not only or "py-amqp" in only:  # the broker's own floor, in the same run (`benchmarks.rabbitmq_floor`)
        got, floor = rabbitmq_floor.run(opts)
        rows += got
        latency += floor
    return rows, latency
