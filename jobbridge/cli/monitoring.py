"""``jobbridge workers`` and ``jobbridge ping``: which worker processes are alive, from their heartbeats.

Both read the store's worker registry (`jobbridge.drivers.worker_registry_port`)
and never create a store. A record whose last beat is older than
`STALE_AFTER` is *stale*: its process was killed, hung, or lost the store.
``ping`` is for health checks (a Kubernetes probe, a systemd timer): it exits
0 only when at least one live worker works each queue asked, 1 when none
does, 2 when the store keeps no registry.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from jobbridge.cli.options import announce, app_options, load_bridge, utc
from jobbridge.drivers.worker_registry_port import STALE_AFTER, WorkerBeat, WorkerRegistry
from jobbridge.worker_monitor import registry_for

NO_REGISTRY_EXIT = 2


def _registry(app: str | None, connection: str | None) -> WorkerRegistry:
    bridge = load_bridge(app)
    name = announce(bridge, connection)
    found = registry_for(bridge, name, create=False)
    if found is None:
        conn = bridge.settings.connection(name)
        click.echo(f"Error: the {conn.driver} driver of connection {name!r} keeps no worker registry, so no "
                   "worker can say it is alive there; declare a locks connection (database or redis) for it, "
                   "or check workers with --health-file", err=True)
        sys.exit(NO_REGISTRY_EXIT)
    return found


def as_data(worker: WorkerBeat, now: float) -> dict[str, Any]:
    return {"id": worker.id, "name": worker.name, "host": worker.host, "pid": worker.pid,
            "connection": worker.connection, "queues": list(worker.queues), "concurrency": worker.concurrency,
            "running": worker.running, "processed": worker.processed, "failed": worker.failed,
            "started_at": worker.started_at, "last_beat": worker.last_beat,
            "seconds_since_beat": round(max(0.0, now - worker.last_beat), 1), "live": worker.is_live(now)}


@click.command()
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON (field names in docs/cli.md).")
def workers(app: str | None, connection: str | None, as_json: bool) -> None:
    """List the worker processes that have beaten lately: live ones first, stale ones marked.

    Each worker process records a heartbeat in the store every few seconds; one
    silent for longer than 15 seconds is marked stale (killed, hung, or cut off
    from the store). Records silent for ten minutes are deleted.
    """
    registry = _registry(app, connection)
    now = registry.now()
    found = sorted(registry.list(), key=lambda w: (not w.is_live(now), w.name, w.pid))
    if as_json:
        click.echo(json.dumps([as_data(w, now) for w in found], indent=2))
        return
    if not found:
        click.echo("no worker has beaten on this store in the last ten minutes")
        return
    click.echo(f"{'state':<6} {'name':<24} {'pid':>7} {'queues':<24} {'running':>7} {'processed':>9} "
               f"{'failed':>6}  last beat")
    for w in found:
        state = "live" if w.is_live(now) else "STALE"
        click.echo(f"{state:<6} {w.name[:24]:<24} {w.pid:>7} {','.join(w.queues)[:24]:<24} "
                   f"{f'{w.running}/{w.concurrency}':>7} {w.processed:>9} {w.failed:>6}  "
                   f"{utc(w.last_beat)} ({now - w.last_beat:.0f}s ago)")
    stale = sum(1 for w in found if not w.is_live(now))
    click.echo(f"{len(found) - stale} live, {stale} stale (no heartbeat for more than {STALE_AFTER:g}s)")


@click.command()
@app_options
@click.option("-Q", "--queue", "--queues", "queues", multiple=True, metavar="Q1,Q2",
              help="The queues that must have a live worker (default: any live worker will do).")
def ping(app: str | None, connection: str | None, queues: tuple[str, ...]) -> None:
    """Exit 0 when a live worker works each given queue; 1 when not (a health check).

    Use it as a Kubernetes exec probe or a systemd check: `jobbridge ping -A
    proj -Q mail`. It reads the heartbeats in the store, so it answers for the
    whole fleet, from any host that reaches the store.
    """
    registry = _registry(app, connection)
    now = registry.now()
    alive = [w for w in registry.list() if w.is_live(now)]
    wanted = [q.strip() for named in queues for q in named.split(",") if q.strip()]
    missing = [q for q in wanted if not any(q in w.queues for w in alive)]
    if not alive or missing:
        what = f"queue(s) {', '.join(missing)}" if missing else "any queue"
        click.echo(f"no live worker works {what} ({len(alive)} live worker process(es) in all)", err=True)
        sys.exit(1)
    click.echo(f"ok: {len(alive)} live worker process(es)" + (f" working {', '.join(wanted)}" if wanted else ""))


def unworked_queues(bridge: Any, connection: str | None, queues: list[dict[str, Any]]) -> list[str] | None:
    """For ``status``: queues with waiting jobs that no live worker works (None: the store cannot tell)."""
    try:
        registry = registry_for(bridge, connection, create=False)
        if registry is None:
            return None
        now = registry.now()
        alive = [w for w in registry.list() if w.is_live(now)]
    except Exception:
        return None
    return [q["queue"] for q in queues if q["ready"] and not any(q["queue"] in w.queues for w in alive)]
