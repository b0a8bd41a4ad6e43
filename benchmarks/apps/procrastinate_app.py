"""Procrastinate's benchmark app: ``procrastinate --app=benchmarks.apps.procrastinate_app.app worker``.

Its PostgreSQL database is `benchmarks.stores.PROCRASTINATE_DB`, of its own:
the harness resets its schema. Sync tasks, as the other libraries' no-ops are.
"""

from __future__ import annotations

from procrastinate import App, PsycopgConnector

from benchmarks import probe
from benchmarks.stores import PROCRASTINATE_DB, pg_url

app = App(connector=PsycopgConnector(conninfo=pg_url(PROCRASTINATE_DB)))


@app.task(name="bench_noop")
def noop() -> None:
    probe.hit()


@app.task(name="bench_stamp")
def stamp(dispatched_at: float) -> None:
    probe.stamp(dispatched_at)
