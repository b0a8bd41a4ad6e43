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
TARGETS = (
    Target("jobbridge processing vs Dramatiq, default concurrency", JB, "process-default", times="dramatiq",
           at_least=1.5),
    Target("jobbridge dispatch_many", JB, "enqueue-batch", at_least=30_000),
    Target("jobbridge latency p50", JB, "latency-p50", at_most=0.001),
)


class AmqpJobbridgeRunner(JobbridgeRunner):
    """jobbridge on its vhost: emptied by making the vhost again (its connections then reopen)."""

    def close(self) -> None:
        super().close()
        vhosts.drop_vhost("jobbridge")


def _clean_jobbridge() -> None:
    vhosts.fresh_vhost("jobbridge")


def _prepare_jobbridge() -> None:
    ensure_pg_database(AMQP_SHARED_DB)
    vhosts.fresh_vhost("jobbridge")


def jobbridge_runner() -> JobbridgeRunner:
    return AmqpJobbridgeRunner(
        JB, vhosts.amqp_url("jobbridge"),
        [Config("process-default", "process, default (1 process x 8 threads)")],
        latency="process-default", clean=_clean_jobbridge, before=_prepare_jobbridge)


PEERS: tuple[tuple[str, Callable[[], Runner]], ...] = (
    (JB, jobbridge_runner),
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
