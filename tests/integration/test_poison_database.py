"""Poison messages on the database driver, with a real `jobbridge worker` (issue 9), on every dialect.

Each bad message is written straight into ``jobbridge_jobs`` (as a buggy
producer, a hand-edited row or an older release would leave it) beside good
jobs dispatched through a bridge. One worker subprocess per dialect works every
queue with ``--stop-when-empty``; then every good job ran exactly once, every
bad message is in the failed store once with a reason naming what was wrong,
and the worker exited 0 with nothing left in the table (see `poison`).

Beside the envelope-level catalogue, the kinds only a table can hold: an
attempt count at the 32-bit column's maximum (which once made every claim of
the queue fail with "integer out of range") or below zero, a body stored as
TEXT or as an integer (SQLite keeps any type in any column), and a unique key
that is a JSON object. The catalogue's 300-character name sits in the body,
beside a name column cut to its 191 characters.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from jobbridge import JobBridge
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.envelope import new_id
from jobbridge.settings import Settings
from tests.drivers.database_servers import DIALECTS, fresh_database
from tests.integration import poison_app
from tests.integration.poison import (
    EXPECT,
    GOOD_PER_KIND,
    HUGE,
    Expect,
    assert_outcome,
    envelope,
    poison_bodies,
    start_worker,
)
from tests.integration.reliability_support import FileRunsReader, Workers

pytestmark = pytest.mark.slow

#: the poison only a table can hold: kind -> (what must become of it, the column values written)
TABLE_KINDS: dict[str, tuple[Expect, dict[str, Any]]] = {
    "attempts_column_at_int_max": (Expect("fail", ("attempt",)), {"attempts": 2**31 - 1}),
    "attempts_column_negative": (Expect("fail", ("attempt",)), {"attempts": -3}),
}
#: SQLite alone stores a value of any type in any column
SQLITE_KINDS: dict[str, tuple[Expect, dict[str, Any]]] = {
    "text_body": (Expect("either", ("body",)), {"text_body": True}),
    "integer_body": (Expect("fail", ("body", "type")), {"body": 42}),
}
MIXED = 1_000


class Store:
    """A fresh database of one dialect, a bridge on it, the runs file and the worker processes."""

    def __init__(self, dialect: str, url: str, tmp: Path) -> None:
        self.dialect = dialect
        self.bridge = JobBridge(Settings.from_mapping({"database_url": url}), jobs=poison_app.ALL)
        driver = self.bridge.driver()  # opening it creates the tables
        assert isinstance(driver, DatabaseDriver)
        self.driver = driver
        self.runs = FileRunsReader(tmp / "runs.log")
        self.workers = Workers(tmp, {"JOBBRIDGE_DATABASE_URL": url, **self.runs.variable})
        mark = "?" if driver.engine.dialect.paramstyle == "qmark" else "%s"
        self._insert = ("INSERT INTO jobbridge_jobs (id, queue, name, body, attempts, available_at, created_at) "
                        f"VALUES ({', '.join([mark] * 7)})")

    def kinds(self) -> dict[str, tuple[Expect, dict[str, Any]]]:
        """The table-level kinds this dialect can hold."""
        return {**TABLE_KINDS, **(SQLITE_KINDS if self.dialect == "sqlite" else {})}

    def write(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rows of (id, queue, name, body, attempts, available_at), straight into the jobs table."""
        now = time.time()
        huge = [row for row in rows if isinstance(row[3], bytes) and len(row[3]) >= HUGE]
        small = [(*row, now) for row in rows if row not in huge]
        with self.driver.engine.begin() as conn:
            if small:
                conn.exec_driver_sql(self._insert, small)
            for row in huge:
                # MariaDB takes no statement over its 16 MiB packet: the server spells the long run out
                start, run, end = row[3].partition(b"x" * HUGE)
                assert run, "a huge body is a long run of x"
                body = "CONCAT(%s, REPEAT('x', %s), %s)" if self.dialect == "mariadb" else None
                if body is None:
                    conn.exec_driver_sql(self._insert, [(*row, now)])
                else:
                    conn.exec_driver_sql(self._insert.replace("%s, %s, %s, %s, %s", f"%s, %s, %s, {body}, %s", 1),
                                         (*row[:3], start, HUGE, end, *row[4:], now))

    def bad_row(self, job_id: str, queue: str, kind: str, body: bytes | None = None) -> tuple[Any, ...]:
        """The row of one bad message: a catalogue body, or a table-level kind's column values."""
        now = time.time()
        if body is not None:
            name = poison_app.GOOD if kind != "long_name" else "poison." + "x" * 184  # the column's 191
            available = 1.0 if kind == "far_past_available_at" else now
            return (job_id, queue, name, body, 0, available)
        columns = self.kinds()[kind][1]
        good = orjson.dumps(envelope(id=job_id, queue=queue))
        stored: Any = good.decode() if columns.get("text_body") else columns.get("body", good)
        return (job_id, queue, poison_app.GOOD, stored, columns.get("attempts", 0), now)

    def good(self, queue: str, count: int) -> list[str]:
        ids = self.bridge.dispatch_many([poison_app.Good(n=i) for i in range(count)], queue=queue)
        return [job_id for job_id in ids if job_id is not None]

    def expect(self) -> dict[str, Expect]:
        return {**EXPECT, **{kind: found[0] for kind, found in self.kinds().items()}}

    def verdict(self, good: list[str], bad: dict[str, str], proc: Any) -> None:
        code = self.workers.exited(proc)
        assert_outcome(good=good, bad=bad, runs=self.runs.all(), failed=self.driver.failed.list(10 * MIXED),
                       exit_code=code, output=self.workers.output(proc), expect=self.expect())
        assert self.driver.counts() == [], "every row acknowledged or failed"

    def close(self) -> None:
        self.workers.close()
        self.bridge.close()


@pytest.fixture(params=DIALECTS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with fresh_database(str(request.param), tmp_path) as url:
        found = Store(str(request.param), url, tmp_path)
        try:
            yield found
        finally:
            found.close()


def test_each_kind_of_poison_beside_fifty_good_jobs(store: Store) -> None:
    """One bad message of each kind, each on its own queue among 50 good jobs; one worker works them all."""
    good: list[str] = []
    bad: dict[str, str] = {}
    rows = []
    kinds = [*EXPECT, *store.kinds()]
    for kind in kinds:
        queue = f"poison.{kind}"
        good += store.good(queue, GOOD_PER_KIND // 2)
        job_id = new_id()
        body = poison_bodies(queue, job_id, [kind])[kind] if kind in EXPECT else None
        rows.append(store.bad_row(job_id, queue, kind, body))
        bad[job_id] = kind
        good += store.good(queue, GOOD_PER_KIND - GOOD_PER_KIND // 2)
    store.write(rows)
    store.verdict(good, bad, start_worker(store.workers, [f"poison.{kind}" for kind in kinds]))


def test_a_thousand_bad_messages_of_every_kind_among_a_thousand_good(store: Store) -> None:
    """The mixed run: bad and good interleaved on one queue (the 10 MB body once, the rest cycling)."""
    queue = "poison.mixed"
    cycle = itertools.cycle([kind for kind in [*EXPECT, *store.kinds()] if kind != "huge_body"])
    kinds = ["huge_body", *(next(cycle) for _ in range(MIXED - 1))]
    good: list[str] = []
    bad: dict[str, str] = {}
    for chunk in range(10):
        good += store.good(queue, MIXED // 10)
        rows = []
        for kind in kinds[chunk * MIXED // 10:(chunk + 1) * MIXED // 10]:
            job_id = new_id()
            body = poison_bodies(queue, job_id, [kind])[kind] if kind in EXPECT else None
            rows.append(store.bad_row(job_id, queue, kind, body))
            bad[job_id] = kind
        store.write(rows)
    store.verdict(good, bad, start_worker(store.workers, [queue]))
