"""One ``jobbridge worker --processes 2 --metrics-port P --health-file F`` on SQLite, asked about itself.

- Metrics: 1,000 jobs of which 100 fail; a scrape of the one port (the
  supervisor's, summing both children) counts 900 succeeded and 100 failed;
  the depth and oldest-age gauges show jobs parked on a queue nobody works.
- Live workers: both children beat into the store; one is SIGKILLed, the
  supervisor replaces it, and ``jobbridge workers`` shows it stale beside two
  live ones; ``ping`` answers 0 for a worked queue and 1 for another;
  ``status`` names the parked queue as waiting with no live worker.
- The health file exists while the loops run and is gone after a clean stop.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import IO, Any

import pytest

from tests.integration import telemetry_app
from tests.integration.reliability_support import REPO, wait_for

pytestmark = pytest.mark.slow

APP = "tests.integration.telemetry_app:make_bridge"
FAILING = set(range(0, 1000, 10))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command() -> list[str]:
    script = Path(sys.executable).with_name("jobbridge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The samples of one scrape, keyed by name and labels."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return sum(v for (n, got), v in samples.items() if n == name and set(labels.items()) <= got)


def test_metrics_live_workers_and_health_under_two_processes(tmp_path: Path) -> None:
    broker = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBBRIDGE_", "CELERY_", "PROMETHEUS_"))}
    env.update(CELERY_BROKER_URL=broker, TELEMETRY_FAILS=",".join(map(str, sorted(FAILING))),
               PYTHONUNBUFFERED="1")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command(), *args, "-A", APP], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=60)

    def listed() -> list[dict[str, Any]]:
        done = cli("workers", "--json")
        assert done.returncode == 0, done.stderr
        found: list[dict[str, Any]] = json.loads(done.stdout)
        return found

    app = telemetry_app.make_celery(broker)
    bridge = app.jobbridge_app()
    bridge.driver().migrate()
    port, health = free_port(), tmp_path / "alive"
    log = tmp_path / "worker.log"
    out: IO[bytes] = log.open("wb")
    proc = subprocess.Popen(
        [*command(), "worker", "-A", APP, "--processes", "2", "--concurrency", "4", "--sleep", "0.05",
         "-Q", "bulk,mail", "--metrics-port", str(port), "--health-file", str(health)],
        cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    out.close()
    try:
        wait_for(lambda: len([w for w in listed() if w["live"]]) == 2, "two live worker processes", 60)
        wait_for(health.exists, "the health file")
        victim = listed()[0]["pid"]
        os.kill(victim, signal.SIGKILL)
        for n in range(5):
            bridge.dispatch(telemetry_app.Signup(user=f"u{n}"), queue="parked")
        samples = scrape(port)
        assert total(samples, "jobbridge_queue_jobs", queue="parked", state="waiting") == 5
        assert ("jobbridge_queue_oldest_waiting_age_seconds", frozenset({("queue", "parked")})) in samples
        assert total(samples, "jobbridge_worker_up") == 1
        bridge.dispatch_many([telemetry_app.Batch(n=n) for n in range(1000)])
        wait_for(lambda: total(scrape(port), "jobbridge_attempts_total", queue="bulk") >= 1000,
                 "1,000 attempts counted", 120)
        samples = scrape(port)
        assert total(samples, "jobbridge_attempts_total", job="tele.batch", outcome="succeeded") == 900
        assert total(samples, "jobbridge_attempts_total", job="tele.batch", outcome="failed") == 100
        assert total(samples, "jobbridge_attempt_duration_seconds_count", queue="bulk") == 1000
        # the store's gauges follow once the outcomes are stored (in batches, just after the attempts)
        wait_for(lambda: total(scrape(port), "jobbridge_failed_jobs") == 100, "100 failed jobs in the store")
        assert total(scrape(port), "jobbridge_queue_jobs", queue="bulk", state="waiting") == 0
        # the killed process's replacement counted, its own threads only (the dead one's gauges dropped)
        wait_for(lambda: total(scrape(port), "jobbridge_worker_processes") == 2, "two processes again")
        wait_for(lambda: total(scrape(port), "jobbridge_worker_threads") == 8, "8 threads")

        def one_stale() -> bool:
            found = listed()
            return sorted(w["live"] for w in found) == [False, True, True] and \
                [w["pid"] for w in found if not w["live"]] == [victim]

        wait_for(one_stale, "the killed process shown stale beside two live ones", 40)
        text = cli("workers")
        assert "STALE" in text.stdout and "2 live, 1 stale" in text.stdout, text.stdout
        assert cli("ping", "-Q", "bulk").returncode == 0
        nobody = cli("ping", "-Q", "parked")
        assert nobody.returncode == 1 and "parked" in nobody.stderr
        status = cli("status", "--json")
        assert json.loads(status.stdout)["unworked"] == ["parked"], status.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        bridge.close()
    assert proc.returncode == 0, log.read_text()
    assert not health.exists()
    assert [w["pid"] for w in listed()] == [victim]  # the clean stops deleted their own records
