"""The ``jobbridge`` command (click): run workers, dispatch and purge jobs, and look after the store.

One module per family of commands:

- `working`: ``worker`` (with `celery_options`, Celery's worker options it refuses);
- `store`: ``status`` (``--json``, ``--watch``), ``migrate``, ``reclaim``;
- `failures`: ``failed`` (and ``failed show ID``), ``retry``, ``flush``;
- `operator`: ``enqueue``, ``purge``;
- `monitoring`: ``workers``, ``ping`` (live workers, from their heartbeats);
- ``scheduler`` and ``schedules``, added by `jobbridge.scheduling.commands`;
- `beat`: ``beat``, the scheduler alone with Celery's beat options;
- ``demo``, here.

Every command takes ``-A module:attr`` (the app; without it, the settings from
the environment or a jobbridge.toml) and ``--connection NAME``, and says on
stderr which store it uses (`options.open_store`). Only ``migrate``,
``enqueue`` and the worker may create a store; the others read or repair one
that exists. docs/cli.md is the manual.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import click

from jobbridge import __version__
from jobbridge.cli.celery_options import CELERY_REFUSED
from jobbridge.errors import JobBridgeError

__all__ = ["CELERY_REFUSED", "cli", "main"]

#: each command's module and name in it, imported when the command runs or a listing (--help) shows it:
#: ``jobbridge worker`` starts without the modules of the commands it is not
COMMANDS: dict[str, tuple[str, str]] = {
    "worker": ("jobbridge.cli.working", "worker"),
    "beat": ("jobbridge.cli.beat", "beat"),
    "enqueue": ("jobbridge.cli.operator", "enqueue"),
    "purge": ("jobbridge.cli.operator", "purge"),
    "failed": ("jobbridge.cli.failures", "failed"),
    "retry": ("jobbridge.cli.failures", "retry"),
    "flush": ("jobbridge.cli.failures", "flush"),
    "status": ("jobbridge.cli.store", "status"),
    "migrate": ("jobbridge.cli.store", "migrate"),
    "reclaim": ("jobbridge.cli.store", "reclaim"),
    "workers": ("jobbridge.cli.monitoring", "workers"),
    "ping": ("jobbridge.cli.monitoring", "ping"),
    "dashboard": ("jobbridge.cli.dashboard", "dashboard"),
}
#: the commands `jobbridge.scheduling.commands.add_commands` adds
SCHEDULING_COMMANDS = ("scheduler", "schedules")


class _Group(click.Group):
    """Turns jobbridge's own errors into a one-line ``Error: ...`` and exit status 1; imports each command
    on first use (`COMMANDS`)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except JobBridgeError as exc:
            raise click.ClickException(str(exc)) from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS, *SCHEDULING_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._import(cmd_name)
        return self.commands.get(cmd_name)

    def _import(self, name: str) -> None:
        if name in COMMANDS:
            module, attr = COMMANDS[name]
            self.add_command(getattr(importlib.import_module(module), attr), name)
        elif name in SCHEDULING_COMMANDS:
            from jobbridge.cli.options import load_bridge
            from jobbridge.cli.working import configure_logging
            from jobbridge.scheduling.commands import add_commands

            add_commands(self, load_bridge, configure_logging)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="jobbridge", message="%(prog)s %(version)s")
def cli() -> None:
    """jobbridge: background jobs over a reservation protocol.

    Run `jobbridge worker -A myapp.jobs:bridge` to process jobs; the other
    commands dispatch and purge jobs and inspect and repair the store (failed
    jobs, counts, lapsed reservations, schema). Each command's --help says more.
    """


@click.command()
@click.option("--path", type=click.Path(dir_okay=False), default=None,
              help="The demo's SQLite file (default: ./jobbridge-demo.sqlite3, recreated on each run).")
@click.option("--jobs", type=click.IntRange(min=1), default=3000, show_default=True,
              help="How many quick jobs to dispatch besides the failing, unique and delayed ones.")
def demo(path: str | None, jobs: int) -> None:
    """Run the demo: a realistic mix of jobs through a worker on SQLite, then a summary.

    Run it to see jobbridge work end to end on a fresh machine: quick jobs,
    retries, a job that lands in the failed store, a unique and a delayed job.
    """
    try:
        import jobbridge.demo as module
    except ModuleNotFoundError as exc:
        if exc.name != "jobbridge.demo":
            raise
        raise click.ClickException("the demo is not installed in this version (jobbridge.demo is missing)") \
            from None
    sys.exit(module.main(path=path, jobs=jobs))


cli.add_command(demo)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``jobbridge`` console script."""
    cli.main(args=None if argv is None else list(argv), prog_name="jobbridge")
