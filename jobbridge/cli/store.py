"""``jobbridge status``, ``migrate`` and ``reclaim``: look at a store, create its schema, repair its leases.

``status`` and ``reclaim`` never create a store (`options.open_store`): run in
the wrong directory, or with the URL of a store that does not exist, they say
so and name ``jobbridge migrate``, instead of answering about a new empty
store made for the occasion. ``migrate`` is the command that creates one.
"""

from __future__ import annotations

import json
import time

import click

from jobbridge.cli import status_view
from jobbridge.cli.options import announce, app_options, load_bridge, open_store
from jobbridge.cli.progress import with_elapsed


@click.command()
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot as JSON (field names in docs/cli.md).")
@click.option("--watch", is_flag=True, help="Redraw every --interval seconds until Ctrl-C.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              help="Seconds between redraws with --watch.")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="With --watch: stop after this many redraws (default: until Ctrl-C).")
def status(app: str | None, connection: str | None, as_json: bool, watch: bool, interval: float,
           count: int | None) -> None:
    """Where the jobs are stored, and how many wait, run and failed, per queue.

    Run it to check that the worker and your web processes see the same
    store (the path or URL printed), and whether work piles up. It reads an
    existing store and never creates one. With --watch it redraws every few
    seconds (with --json: one JSON document per line) until Ctrl-C.
    """
    bridge, driver = open_store(app, connection)
    shown = 0
    try:
        while True:
            data = status_view.snapshot(bridge, driver, connection)
            if as_json:
                click.echo(json.dumps(data) if watch else json.dumps(data, indent=2))
            elif watch:
                status_view.frame(status_view.render(data), shown)
            else:
                click.echo(status_view.render(data))
            shown += 1
            if not watch or (count is not None and shown >= count):
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return  # Ctrl-C ends a watch; it is not an error
    finally:
        bridge.close()


@click.command()
@app_options
def migrate(app: str | None, connection: str | None) -> None:
    """Create or upgrade the store's tables (a no-op for stores without a schema).

    The database driver creates missing tables when a worker or a dispatch
    opens it; run this in a deploy step when the application's database
    user may not create tables, or to create a store the read-only commands
    (status, failed, retry, flush, purge) can then read.
    """
    bridge = load_bridge(app)
    name = announce(bridge, connection)

    def work() -> str:
        driver = bridge.driver(name)  # opening a database store creates what is missing already
        driver.migrate()
        return driver.describe()

    try:
        click.echo(f"migrated {with_elapsed('migrating', work)}")
    finally:
        bridge.close()


@click.command()
@app_options
def reclaim(app: str | None, connection: str | None) -> None:
    """Make jobs whose reservation lapsed (their worker died) available again.

    Running workers do this every half reservation by themselves; run it by
    hand after killing workers, when none is running, to see the count.
    """
    bridge, driver = open_store(app, connection)
    click.echo(f"reclaimed {driver.reclaim_expired()} job(s) whose reservation had lapsed")
    bridge.close()
