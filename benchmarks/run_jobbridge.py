"""jobbridge as a benchmark `Runner`, on any of its stores (SQLite, PostgreSQL, MariaDB, Redis).

The harness dispatches from its own process through a `JobBridge` built from
the same settings as `benchmarks.apps.jobbridge_app`; the worker is the real
``jobbridge worker`` console script in a subprocess. Each processing
configuration runs twice: at the worker's default log level (INFO, one line per
attempt: the headline row, the figure a user gets) and, in the row beside it,
at ``-l warning`` (no line per attempt, as every peer runs), keyed
``<key>-warning``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from benchmarks.apps.jobbridge_app import Noop, Stamp, settings_for
from benchmarks.common import ProbeServer, WorkerGroup, child_env, venv_bin
from jobbridge import JobBridge


@dataclass(frozen=True)
class Config:
    """One worker configuration: its scenario key, its label, and the worker's flags."""

    key: str
    label: str
    processes: int | None = None  # None: the worker's default
    concurrency: int | None = None
    extra: tuple[str, ...] = ()
    loglevel: str | None = None  # None: the worker's default (INFO)
    app: str = "benchmarks.apps.jobbridge_app:bridge"  # what -A names
    metrics: bool = False  # --metrics-port on a free port of 127.0.0.1


#: the key suffix of a configuration's row at ``-l warning``, beside its row at the default level
WARNING_SUFFIX = "-warning"


def with_warning_rows(configs: Sequence[Config]) -> list[Config]:
    """Each configuration at the default log level, then the same at WARNING."""
    out: list[Config] = []
    for c in configs:
        out.append(c)
        if c.loglevel is None:
            out.append(replace(c, key=c.key + WARNING_SUFFIX, label=c.label + ", -l warning", loglevel="warning"))
    return out


#: the plain one-process row at -l warning with all of the telemetry on: OpenTelemetry and Sentry (set up by the
#: app module), Prometheus (--metrics-port) and the heartbeat (always on); compared with ``process-1p-warning``
TELEMETRY = Config("process-1p-telemetry", "process, 1 process x 8 threads, -l warning, OTel + Sentry + metrics",
                   loglevel="warning", app="benchmarks.apps.jobbridge_telemetry_app:bridge", metrics=True)


#: the same with the issue's "heartbeat, metrics" alone: Prometheus (--metrics-port) and the heartbeat
METRICS = Config("process-1p-metrics", "process, 1 process x 8 threads, -l warning, metrics",
                 loglevel="warning", metrics=True)


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now (for the worker's --metrics-port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class JobbridgeRunner:
    """Dispatch with `dispatch` / `dispatch_many`; process with ``jobbridge worker`` subprocesses."""

    batch_note = "dispatch_many(): one call, one round trip"

    def __init__(self, library: str, url: str, configs: Sequence[Config], latency: str, *,
                 clean: Callable[[], None], before: Callable[[], None] = lambda: None,
                 poll_interval: float = 0.0) -> None:
        self.library = library
        self.url = url
        configs = with_warning_rows(configs)
        self._configs = {c.key: c for c in configs}
        self.configs = [(c.key, c.label) for c in configs]
        self.latency_config = latency
        self.poll_interval = poll_interval
        self._clean, self._before = clean, before
        self.bridge: JobBridge | None = None

    def prepare(self) -> None:
        """Create the store if needed (``before``), the tables, then empty it."""
        self._before()
        self.bridge = JobBridge(settings_for(self.url), jobs=[Noop, Stamp])
        self.bridge.driver().migrate()
        self._clean()

    def clean(self) -> None:
        self._clean()

    def _bridge(self) -> JobBridge:
        assert self.bridge is not None, "prepare() first"
        return self.bridge

    def enqueue_single(self, count: int) -> None:
        dispatch = self._bridge().dispatch
        for _ in range(count):
            dispatch(Noop())

    def enqueue_batch(self, count: int) -> None:
        self._bridge().dispatch_many([Noop() for _ in range(count)])

    def worker(self, key: str, probe: ProbeServer) -> WorkerGroup:
        config = self._configs[key]
        cmd = [venv_bin("jobbridge"), "worker", "-A", config.app]
        if config.loglevel is not None:
            cmd += ["-l", config.loglevel]
        if config.processes is not None:
            cmd += ["--processes", str(config.processes)]
        if config.concurrency is not None:
            cmd += ["--concurrency", str(config.concurrency)]
        if config.metrics:
            cmd += ["--metrics-port", str(free_port())]
        cmd += list(config.extra)
        return WorkerGroup(f"{self.library}-{key}", [cmd], child_env(probe, JB_BENCH_URL=self.url))

    def dispatch_stamp(self, dispatched_at: float) -> None:
        self._bridge().dispatch(Stamp(dispatched_at=dispatched_at))

    def close(self) -> None:
        if self.bridge is not None:
            self.bridge.close()
