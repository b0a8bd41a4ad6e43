"""``jobbridge failed`` (and ``failed show ID``), ``retry`` and ``flush``: the failed store, after an incident.

None of them creates a store. A listing is filtered by the store where it can
(`jobbridge.drivers.base.FailedFilter`), so ``--queue``, ``--job`` and
``--since`` stay fast on a large failed store. ``failed show`` prints the
whole error with its traceback, and the payload only when ``--payload`` asks
for it: a payload may hold personal data, and a terminal is often shared or
recorded. ``flush`` deletes for good, so it asks first unless ``--yes``.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import click

from jobbridge.cli.options import Moment, app_options, open_store, utc, yes_option
from jobbridge.cli.progress import with_progress
from jobbridge.drivers.base import FailedFilter
from jobbridge.envelope import Envelope
from jobbridge.errors import NoFailedJob, PayloadDecodeError
from jobbridge.store_reports import FailedJob

_HEADER = ("ID", "QUEUE", "JOB", "ATTEMPTS", "FAILED AT (UTC)", "ERROR")


def listed(job: FailedJob) -> dict[str, Any]:
    """A failed job as ``failed --json`` prints it (the error's first line; ``failed show`` has the rest)."""
    return {"id": job.id, "queue": job.queue, "job": job.name, "attempts": job.attempts,
            "failed_at": datetime.fromtimestamp(job.failed_at, UTC).isoformat(), "error": job.error.split("\n", 1)[0]}


def table(jobs: list[FailedJob]) -> list[str]:
    """A header and one aligned row per job; the error's first line last, never cut."""
    rows = [_HEADER, *((j.id, j.queue, j.name, str(j.attempts), utc(j.failed_at), j.error.split("\n", 1)[0])
                       for j in jobs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER) - 1)]

    def line(row: tuple[str, ...]) -> str:
        cells = [row[i].rjust(width) if i == 3 else row[i].ljust(width) for i, width in enumerate(widths)]
        return "  ".join([*cells, row[-1]]).rstrip()

    return [line(row) for row in rows]


@click.group(invoke_without_command=True)
@app_options
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1),
              help="Show at most this many, newest first.")
@click.option("--queue", help="Only the jobs that failed on this queue.")
@click.option("--job", "name", metavar="NAME", help="Only the jobs of this name.")
@click.option("--since", type=Moment(), help="Only those that failed since then: 90s, 15m, 2h, 3d, 1w, or an "
                                             "ISO 8601 date or time (UTC unless it says otherwise).")
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON (field names in docs/cli.md).")
@click.pass_context
def failed(ctx: click.Context, app: str | None, connection: str | None, limit: int, queue: str | None,
           name: str | None, since: float | None, as_json: bool) -> None:
    """List failed jobs, newest first: id, queue, job, attempts, when (UTC), first line of the error.

    A job lands here when its last attempt failed, or when it could not run
    at all (no registered class by its name, an undecodable payload). Look
    here after an incident; `jobbridge failed show ID` prints one whole;
    then `jobbridge retry ID` or `jobbridge flush`.
    """
    ctx.obj = {"app": app, "connection": connection}
    if ctx.invoked_subcommand is not None:
        return
    bridge, driver = open_store(app, connection)
    jobs = driver.failed.list(limit, FailedFilter(queue=queue, name=name, since=since))
    total = driver.failed.count()
    bridge.close()
    if as_json:
        click.echo(json.dumps({"total_failed": total, "jobs": [listed(job) for job in jobs]}, indent=2))
    elif not jobs:
        click.echo("no failed jobs" + (" match" if (queue, name, since) != (None, None, None) else ""))
    else:
        click.echo("\n".join(table(jobs)))
        if len(jobs) == limit and total > limit:
            click.echo(f"({len(jobs)} shown of {total} failed; raise --limit to see more)")


@failed.command()
@app_options
@click.argument("job_id", metavar="ID")
@click.option("--payload", is_flag=True, help="Also print the job's payload (it may hold personal data).")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@click.pass_context
def show(ctx: click.Context, app: str | None, connection: str | None, job_id: str, payload: bool,
         as_json: bool) -> None:
    """Print one failed job whole: its error and traceback (and, with --payload, its payload)."""
    given = ctx.obj or {}
    bridge, driver = open_store(app or given.get("app"), connection or given.get("connection"))
    job = driver.failed.get(job_id)
    bridge.close()
    if job is None:
        raise click.ClickException(f"there is no failed job with id {job_id}")
    data = {**listed(job), "error": job.error}
    if payload:
        data["payload"] = _payload(job)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    for key in ("id", "queue", "job", "attempts"):
        click.echo(f"{key:<10} {data[key]}")
    click.echo(f"{'failed at':<10} {utc(job.failed_at)} UTC\n\n{job.error}")
    if payload:
        click.echo("\npayload:\n" + (json.dumps(data["payload"], indent=2, default=str)))


def _payload(job: FailedJob) -> Any:
    """The stored payload, or what the body is when it never decoded (a job that could not run)."""
    try:
        return dict(Envelope.decode(job.body).payload)
    except PayloadDecodeError as exc:
        return {"undecodable": str(exc), "body": job.body.decode("utf-8", errors="replace")}


@click.command()
@app_options
@click.argument("ids", nargs=-1, required=True, metavar="ID...|all")
def retry(app: str | None, connection: str | None, ids: tuple[str, ...]) -> None:
    """Put failed jobs back on their queues: by id, or `all`.

    A retried job keeps its id and payload and starts its attempts over; run
    it after fixing what made it fail. An id that is not a failed job is an
    error (exit status 1).
    """
    bridge, driver = open_store(app, connection)
    missing = 0
    for job_id in ids:
        try:
            if job_id == "all":
                count = with_progress("retrying", lambda: driver.failed.retry("all"), driver.failed.count(),
                                      driver.failed.count)
            else:
                count = driver.failed.retry(job_id)
        except NoFailedJob:
            click.echo(f"there is no failed job with id {job_id}", err=True)
            missing += 1
            continue
        click.echo(f"put {count} failed job(s) back on their queues" if job_id == "all"
                   else f"put {job_id} back on its queue")
    bridge.close()
    if missing:
        sys.exit(1)


@click.command()
@app_options
@yes_option
def flush(app: str | None, connection: str | None, yes: bool) -> None:
    """Delete every failed job, for good (asks first, unless --yes).

    Run it once the failed jobs have been looked at and are not worth
    retrying. Waiting and running jobs are not touched.
    """
    bridge, driver = open_store(app, connection)
    total = driver.failed.count()
    if total and not yes:
        click.confirm(f"Delete all {total} failed job(s) of {driver.describe()} for good?", abort=True, err=True)
    deleted = with_progress("flushing", driver.failed.flush, total, driver.failed.count)
    bridge.close()
    click.echo(f"deleted {deleted} failed job(s)")
