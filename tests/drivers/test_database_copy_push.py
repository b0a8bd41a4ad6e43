"""A large push on PostgreSQL goes by COPY: every row lands as the INSERT would have stored it.

The rows travel in COPY's text format, so a payload with the characters that
format escapes (tab, newline, backslash) and non-ASCII text must read back
unchanged, and a failure (a duplicate id) must raise what the INSERT raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobbridge import Job, JobBridge, JobContext
from jobbridge.drivers.database.driver import COPY_FROM, DatabaseDriver
from jobbridge.settings import Settings
from tests.drivers.database_servers import fresh_database

AWKWARD = "tab\there, line\nbreak, back\\slash, \\N, quote\" ü 🦀"


class Note(Job, name="copy.note"):
    text: str
    n: int = 0

    def handle(self, ctx: JobContext) -> None:
        pass


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[JobBridge]:
    with fresh_database("postgresql", tmp_path) as url:
        app = JobBridge(Settings.from_mapping({"driver": "database", "database_url": url}), jobs=[Note])
        yield app
        app.close()


def test_a_push_by_copy_stores_every_job_as_an_insert_would(bridge: JobBridge) -> None:
    driver = bridge.driver()
    assert isinstance(driver, DatabaseDriver)
    envelopes = [bridge.envelope(Note(text=AWKWARD, n=i)) for i in range(COPY_FROM + 5)]
    driver.push(envelopes)
    got = {r.id: r.envelope for r in driver.reserve(["default"], len(envelopes) + 10)}
    assert set(got) == {env.id for env in envelopes}
    for env in envelopes:
        stored = got[env.id]
        assert (stored.payload, stored.created_at, stored.headers) == (env.payload, env.created_at, env.headers)


def test_a_duplicate_id_fails_the_same_way_by_copy_or_by_insert(bridge: JobBridge) -> None:
    driver = bridge.driver()
    envelopes = [bridge.envelope(Note(text="x", n=i)) for i in range(COPY_FROM)]
    driver.push(envelopes)
    with pytest.raises(Exception) as by_insert:
        driver.push([envelopes[0]])
    with pytest.raises(type(by_insert.value), match="push jobs"):
        driver.push(envelopes)  # by COPY
    assert sum(c.ready for c in driver.counts()) == COPY_FROM
