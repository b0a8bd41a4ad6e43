"""What ``jobbridge worker`` imports before its first job: its own command, not the others.

The CLI imports each command's module when that command runs or a listing
shows it (`jobbridge.cli.COMMANDS`), and the app and the settings import the
schedules' modules only when there are schedules, so a worker's start-up pays
for neither. Every command is still there, by the same name, and ``-B`` still
starts the scheduler beside the worker.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from jobbridge.cli import COMMANDS, SCHEDULING_COMMANDS, cli
from tests.cli.support import APP, REPO, environment

#: runs the jobbridge command given in argv, then prints the modules it imported on stderr
LISTING = """
import atexit, sys
atexit.register(lambda: print("MODULES", *sorted(sys.modules), file=sys.stderr))
from jobbridge.cli import main
sys.argv[0] = "jobbridge"
main()
"""
#: modules a worker without -B and --processes has no use for
NOT_FOR_A_WORKER = ("jobbridge.cli.beat", "jobbridge.cli.dashboard", "jobbridge.cli.failures",
                    "jobbridge.cli.monitoring", "jobbridge.cli.operator", "jobbridge.cli.store",
                    "jobbridge.cli.status_view", "jobbridge.scheduling", "jobbridge.supervisor", "jobbridge.dashboard")


def imported_by(*args: str, tmp_path: Path) -> set[str]:
    ran = subprocess.run([sys.executable, "-c", LISTING, *args], cwd=REPO, capture_output=True, text=True,
                         env=environment({"JOBBRIDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.sqlite3'}"}),
                         timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    (line,) = [line for line in ran.stderr.splitlines() if line.startswith("MODULES ")]
    return set(line.split()[1:])


def test_a_worker_imports_neither_the_other_commands_nor_the_scheduler(tmp_path: Path) -> None:
    modules = imported_by("worker", "-A", APP, "--once", tmp_path=tmp_path)
    assert "jobbridge.cli.working" in modules and "jobbridge.worker" in modules
    assert sorted(m for m in modules if m.startswith(NOT_FOR_A_WORKER)) == []


def test_a_worker_with_the_scheduler_beside_it_imports_it(tmp_path: Path) -> None:
    modules = imported_by("worker", "-A", APP, "--once", "-B", tmp_path=tmp_path)
    assert "jobbridge.scheduling.scheduler" in modules and "jobbridge.scheduling.commands" in modules


def test_every_command_is_listed_and_found_by_its_name() -> None:
    ctx = click.Context(cli)
    names = cli.list_commands(ctx)
    assert names == sorted({*COMMANDS, *SCHEDULING_COMMANDS, "demo"})
    for name in names:
        command = cli.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name
    assert cli.get_command(ctx, "no-such-command") is None
