"""What ``jobbridge status`` shows: one snapshot of a store, as data (``--json``) and as text.

The data's field names are stable (docs/cli.md lists them), so a monitoring
script may read them; the text is for people and may change. A capability
is named for what it means to a user: the driver's ``priorities`` is the
order in which a worker empties its queues (``-Q high,default``), so it is
``ordered_queues`` here; no driver has a per-message priority.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

import click

from jobbridge.app import JobBridge
from jobbridge.cli.monitoring import unworked_queues
from jobbridge.drivers.base import Driver
from jobbridge.worker_process import worked_queues

#: capability fields whose own name would mislead
_WORDS = {"priorities": "ordered_queues"}
_COLUMNS = ("pending", "ready", "delayed", "reserved")


def snapshot(bridge: JobBridge, driver: Driver, connection: str | None) -> dict[str, Any]:
    """Where the store is and what it holds now, per queue: the ``--json`` document."""
    conn = bridge.settings.connection(connection)
    counts = {c.queue: c for c in driver.counts()}
    # the queues a worker would work come first, even when empty, then any other the store holds
    names = list(dict.fromkeys([*worked_queues(bridge)[0], *sorted(counts)]))
    queues = []
    for name in names:
        c = counts.get(name)
        queues.append({"queue": name, "pending": c.pending if c else 0, "ready": c.ready if c else 0,
                       "delayed": c.delayed if c else 0, "reserved": c.reserved if c else 0})
    caps = driver.capabilities
    capabilities: dict[str, Any] = {_WORDS.get(f.name, f.name): getattr(caps, f.name) for f in fields(caps)}
    capabilities["shared_locks"] = driver.locks.shared  # the lock store's to say, not the driver's
    return {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "store": driver.describe(),
        "connection": conn.name,
        "driver": conn.driver,
        "reservation": conn.reservation,
        "queues": queues,
        "failed": driver.failed.count(),
        "capabilities": capabilities,
        # queues whose jobs wait with no live worker on them (null: the store keeps no worker registry)
        "unworked": unworked_queues(bridge, conn.name, queues),
    }


def _answer(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "no limit" if value is None else str(value)


def render(data: dict[str, Any]) -> str:
    """The snapshot as the lines ``jobbridge status`` prints."""
    lines = [
        f"store        {data['store']}",
        f"connection   {data['connection']} ({data['driver']} driver, reservation {data['reservation']:g}s)",
        f"{'queue':<20} " + " ".join(f"{column:>8}" for column in _COLUMNS),
    ]
    lines += [f"{q['queue']:<20} " + " ".join(f"{q[column]:>8}" for column in _COLUMNS) for q in data["queues"]]
    lines.append(f"failed       {data['failed']}")
    caps = data["capabilities"]
    shown = (f"{key.replace('_', ' ')}: {_answer(value)}" for key, value in caps.items())
    lines.append("capabilities " + ", ".join(shown))
    if data.get("unworked"):
        lines.append(f"WARNING      jobs wait on {', '.join(data['unworked'])}, and no live worker works "
                     "it: start one with -Q naming it (jobbridge workers lists those alive)")
    if caps["may_lose_an_accepted_job"]:
        lines.append(f"WARNING      the {data['driver']} driver may lose a job it has accepted (a crash before it "
                     "persisted, memory eviction); where every job must survive, use the database driver")
    return "\n".join(lines)


def frame(text: str, number: int) -> None:
    """One redraw of ``status --watch``: the screen cleared on a terminal, a rule between frames elsewhere."""
    if sys.stdout.isatty():
        click.clear()
    elif number:
        click.echo("")
    click.echo(text)
