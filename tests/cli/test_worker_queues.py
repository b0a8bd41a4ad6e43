"""A worker works the jobs it knows: without ``-Q`` and a ``queues`` setting, the queues its registered jobs name.

The app (tests/cli/cli_app.py) registers jobs on default, mail, reports and
orders. A worker started with neither works all four, the default queue
first; one whose ``queues`` setting leaves some out says so in one banner
line. Both through the real command, on SQLite.
"""

from __future__ import annotations

from pathlib import Path

from jobbridge import Job, JobBridge, JobContext
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from jobbridge.worker_process import worked_queues
from tests.cli import cli_app
from tests.cli.support import APP, jobbridge


def _filled(tmp_path: Path) -> tuple[str, JobBridge]:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    bridge = cli_app.bridge_for(url)
    bridge.dispatch_many([cli_app.SendMail(to="a@example.com") for _ in range(10)])
    bridge.dispatch_many([cli_app.Noop(n=i) for i in range(3)] + [cli_app.Report()])
    return url, bridge


def test_without_q_the_worker_works_every_queue_its_jobs_name(tmp_path: Path) -> None:
    url, bridge = _filled(tmp_path)
    ran = jobbridge("worker", "-A", APP, "--stop-when-empty", "--sleep", "0.05", "-l", "warning",
                    env={"JOBBRIDGE_DATABASE_URL": url})
    assert ran.returncode == 0, ran.stderr
    assert "queues       default, mail, reports, orders (in priority order)" in ran.stdout
    assert "not worked" not in ran.stdout
    assert "Processed 14 job attempt(s): 14 succeeded" in ran.stdout
    assert pending(bridge.driver(), "mail") == 0
    bridge.close()


def test_a_queues_setting_that_leaves_a_jobs_queue_out_says_so_in_one_line(tmp_path: Path) -> None:
    url, bridge = _filled(tmp_path)
    ran = jobbridge("worker", "-A", APP, "--stop-when-empty", "--sleep", "0.05", "-l", "warning",
                    env={"JOBBRIDGE_DATABASE_URL": url, "JOBBRIDGE_QUEUES": "default,reports"})
    assert ran.returncode == 0, ran.stderr
    (line,) = [line for line in ran.stdout.splitlines() if "not worked" in line]
    assert line.split() == ["not", "worked", "mail,", "orders:", "registered", "jobs", "name", "these", "queues,",
                            "which", "-Q", "or", "the", "queues", "setting", "leaves", "out"]
    assert "Processed 4 job attempt(s)" in ran.stdout
    assert pending(bridge.driver(), "mail") == 10
    bridge.close()


class Late(Job, name="cli.late", queue="zeta"):
    def handle(self, ctx: JobContext) -> None:
        pass


class Early(Job, name="cli.early", queue="alpha"):
    def handle(self, ctx: JobContext) -> None:
        pass


def test_the_order_is_the_default_queue_then_registration_order() -> None:
    memory = Settings.from_mapping({"driver": "memory"})
    bridge = JobBridge(memory, jobs=[Late, cli_app.SendMail, Early, cli_app.Noop, Late])
    assert worked_queues(bridge) == (("default", "zeta", "mail", "alpha"), ())
    assert worked_queues(bridge, ["mail", "mail"]) == (("mail",), ("zeta", "alpha", "default"))
    named = JobBridge(Settings.from_mapping({"driver": "memory", "queues": ["alpha"]}), jobs=[Late, Early])
    assert worked_queues(named) == (("alpha",), ("zeta",))
    # what a worker without -Q works is also what run_pending works
    bridge.dispatch(Late())
    assert bridge.run_pending().succeeded == 1
