"""``jobbridge enqueue`` and ``jobbridge purge``: what cron and an operator in an incident reach for.

``enqueue NAME --payload JSON`` builds the job from its registered class, so the
payload is decoded exactly as a worker would decode it: a field that does not
fit is an error naming the field (never its value) before anything is stored,
instead of a job that fails in a worker later. It prints the job's id alone on
stdout, for a script to keep.

``purge QUEUE...`` deletes the jobs *waiting* on those queues (ready or
delayed) and leaves the reserved ones to finish: deleting a running job's row
would not stop it. It asks first, unless ``--yes``, and prints how many went.
"""

from __future__ import annotations

from typing import Any

import click
import orjson

from jobbridge import payload as codec
from jobbridge.cli.options import app_options, open_store, yes_option
from jobbridge.cli.progress import with_progress
from jobbridge.drivers.base import Driver
from jobbridge.errors import PayloadDecodeError
from jobbridge.registry import JobRegistry
from jobbridge.setting_checks import suggest


@click.command()
@app_options
@click.argument("name")
@click.option("--payload", "given", metavar="JSON", default="{}", show_default=True,
              help="The job's fields as a JSON object, decoded as the job class's fields.")
@click.option("--queue", help="The queue to push it to (default: the job class's).")
@click.option("--delay", type=click.FloatRange(min=0), help="Seconds before a worker may start it.")
def enqueue(app: str | None, connection: str | None, name: str, given: str, queue: str | None,
            delay: float | None) -> None:
    """Dispatch one job by name, as the app would: for cron and scripts.

    The payload is decoded as the registered job class's fields, so a field
    of the wrong type is an error here, naming the field. Prints the job's id
    (nothing when it is a unique job whose key is already queued).
    """
    if not app:
        raise click.UsageError("jobbridge enqueue needs -A MODULE[:ATTR]: it builds the job from the class "
                               "that the app registers under NAME")
    bridge, _ = open_store(app, connection, create=True)
    try:
        job = _job(bridge.registry, name, given)
        job_id = bridge.dispatch(job, queue=queue, delay=delay, connection=connection)
    finally:
        bridge.close()
    if job_id is None:
        click.echo(f"not dispatched: a unique {name} job with this key is queued already", err=True)
    else:
        click.echo(job_id)


def _job(registry: JobRegistry, name: str, given: str) -> Any:
    """The job instance ``--payload`` describes; an error naming what does not fit."""
    if name not in registry:
        names = registry.names()
        registered = ", ".join(names) or "none"
        raise click.ClickException(f"no job named {name!r} is registered by the app{suggest(name, names)}; "
                                   f"registered: {registered}")
    try:
        data = orjson.loads(given)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON ({exc})", param_hint="--payload") from None
    if not isinstance(data, dict):
        raise click.BadParameter("a JSON object of the job's fields, such as {\"invoice_id\": 7}",
                                 param_hint="--payload")
    try:
        return codec.decode(registry.get(name), data)
    except PayloadDecodeError as exc:
        raise click.BadParameter(f"does not fit job {name!r}: {exc}", param_hint="--payload") from None


def waiting(driver: Driver, queues: list[str]) -> int:
    """How many jobs wait (ready or delayed) on ``queues``, by the store's own counts."""
    return sum(c.ready + c.delayed for c in driver.counts() if c.queue in queues)


@click.command()
@app_options
@click.argument("queues", nargs=-1, required=True, metavar="QUEUE...")
@yes_option
def purge(app: str | None, connection: str | None, queues: tuple[str, ...], yes: bool) -> None:
    """Delete the waiting jobs (ready or delayed) of the queues named, for good; reserved ones finish.

    Asks first, unless --yes, then prints how many were deleted. A purged
    unique job's lock goes with it, so it can be dispatched again at once.
    """
    bridge, driver = open_store(app, connection)
    names = list(dict.fromkeys(queues))
    try:
        driver.purge([])  # a store that cannot purge says so now, before anyone is asked
        total = waiting(driver, names)
        if total and not yes:
            click.confirm(f"Delete {total} waiting job(s) from {', '.join(names)} of {driver.describe()} for "
                          "good? (reserved jobs are left to finish)", abort=True, err=True)
        deleted = with_progress("purging", lambda: driver.purge(names), total, lambda: waiting(driver, names))
    finally:
        bridge.close()
    click.echo(f"purged {deleted} waiting job(s) from {', '.join(names)}")
