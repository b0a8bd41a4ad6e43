"""The worker command's telemetry options: ``--metrics-port``, ``--metrics-host``, ``--health-file``.

Kept out of `jobbridge.cli.working` so the worker command only asks two
questions: what runs beside one worker process (`beside_worker`: its monitor
thread, and the metrics server when it runs alone), and what a supervisor adds
(`beside_supervisor`: the one metrics server for all its children, the
children's extra options, what to do when one exits). The heartbeat into the
store's worker registry is always on: it costs one write per process every
few seconds.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from jobbridge.app import JobBridge
from jobbridge.worker import Worker, WorkerOptions
from jobbridge.worker_monitor import WorkerMonitor, registry_for, throughput_for

if TYPE_CHECKING:  # a worker process without --processes never imports the supervisor
    from jobbridge.supervisor import Supervisor

F = TypeVar("F", bound=Callable[..., Any])
#: the metrics server's address unless --metrics-host says otherwise: this host alone
DEFAULT_METRICS_HOST = "127.0.0.1"


def telemetry_options(command: F) -> F:
    """The options, as click decorators (the hidden one tells a supervised child where metrics go)."""
    for option in reversed([
        click.option("--metrics-port", type=click.IntRange(1, 65535), metavar="PORT",
                     help="Serve Prometheus metrics on http://HOST:PORT/metrics (pip install "
                          "'jobbridge[prometheus]'); under --processes one port serves every process."),
        click.option("--metrics-host", default=DEFAULT_METRICS_HOST, show_default=True, metavar="HOST",
                     help="The address the metrics server listens on; 0.0.0.0 in a container whose port "
                          "Prometheus scrapes from outside."),
        click.option("--health-file", type=click.Path(dir_okay=False), metavar="FILE",
                     help="Touch FILE every second while the worker's loop runs (a liveness check for "
                          "orchestrators that check a file's age); deleted on a clean stop."),
        click.option("--metrics-dir", hidden=True),
    ]):
        command = option(command)
    return command


@dataclass(frozen=True)
class Telemetry:
    metrics_port: int | None
    metrics_host: str
    health_file: str | None
    metrics_dir: str | None

    @classmethod
    def of(cls, args: Any) -> Telemetry:
        telemetry = cls(args.metrics_port, args.metrics_host or DEFAULT_METRICS_HOST, args.health_file,
                        args.metrics_dir)
        if telemetry.metrics_port is not None or telemetry.metrics_dir is not None:
            _prometheus()  # missing: refused now, before anything starts
        return telemetry

    @contextlib.contextmanager
    def beside_worker(self, bridge: JobBridge, worker: Worker, *, supervised: bool) -> Iterator[None]:
        """Around `Worker.run` in one worker process."""
        samplers = []
        if self.metrics_dir is not None or self.metrics_port is not None:
            prometheus = _prometheus()
            prometheus.instrument()
            samplers.append(prometheus.sample_worker)
            if not supervised and self.metrics_port is not None:
                prometheus.serve(bridge, worker.options.connection, self.metrics_host, self.metrics_port,
                                 processes=lambda: 1)
        monitor = WorkerMonitor(worker, registry_for(bridge, worker.options.connection), self.health_file,
                                samplers=samplers, throughput=throughput_for(bridge, worker.options.connection))
        monitor.start()
        try:
            yield
        finally:
            monitor.stop()

    @contextlib.contextmanager
    def beside_supervisor(self, bridge: JobBridge, options: WorkerOptions) -> Iterator[Supervising]:
        """Around `Supervisor.run`: the one metrics server for every child, and what the children get."""
        beside = Supervising(["--health-file", self.health_file] if self.health_file else [])
        if self.metrics_port is None:
            yield beside
            return
        import shutil
        import tempfile

        prometheus = _prometheus()
        folder = tempfile.mkdtemp(prefix="jobbridge-metrics-")
        os.environ[prometheus.MULTIPROC_DIR] = folder  # inherited by every child the supervisor starts
        beside.extra += ["--metrics-dir", folder]
        beside.on_exit = prometheus.child_died
        try:
            prometheus.serve(bridge, options.connection, self.metrics_host, self.metrics_port,
                             processes=beside.processes, multiprocess_dir=folder)
            yield beside
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Supervising:
    """What a supervisor's children are given (``extra`` options) and told (``on_exit``)."""

    extra: list[str]
    on_exit: Callable[[int], None] | None = None
    supervisor: Supervisor | None = None

    def processes(self) -> int:
        return 0 if self.supervisor is None else len(self.supervisor.pids())


def _prometheus() -> Any:
    try:
        import jobbridge.integrations.prometheus as prometheus
    except ModuleNotFoundError as exc:
        if exc.name != "prometheus_client":
            raise
        raise click.UsageError("--metrics-port needs prometheus_client: pip install 'jobbridge[prometheus]'") \
            from None
    return prometheus
