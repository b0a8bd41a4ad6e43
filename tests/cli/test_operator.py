"""``jobbridge enqueue`` and ``jobbridge purge`` through the real command, on SQLite and Redis.

enqueue: the id it prints is the job stored, with the payload decoded as the
job class's fields; a payload that does not fit is refused naming the field,
never quoting the value, and nothing is stored. purge: waiting jobs go (ready
and delayed), a reserved one stays and can still be settled; without
``--yes`` it asks, and a "no" deletes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobbridge import JobBridge
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from tests.cli import cli_app
from tests.cli.support import APP, errors, jobbridge
from tests.drivers.redis_helpers import drop_keys
from tests.services import ensure_redis


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[tuple[dict[str, str], JobBridge]]:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    bridge = cli_app.bridge_for(url)
    bridge.driver().migrate()
    yield {"JOBBRIDGE_DATABASE_URL": url}, bridge
    bridge.close()


def test_enqueue_stores_the_job_decoded_as_its_class(sqlite: tuple[dict[str, str], JobBridge]) -> None:
    env, bridge = sqlite
    ran = jobbridge("enqueue", "-A", APP, "cli.mail", "--payload", '{"to": "ann@example.com"}', "--delay", "30",
                    env=env)
    assert ran.returncode == 0, ran.stderr
    job_id = ran.stdout.strip()
    assert "store: sqlite:///" in ran.stderr
    (counts,) = bridge.driver().counts()
    assert (counts.queue, counts.delayed) == ("mail", 1)
    again = jobbridge("enqueue", "-A", APP, "cli.noop", "--queue", "reports", env=env)
    assert again.returncode == 0
    (res,) = bridge.driver().reserve(["reports"], 1)
    assert res.envelope.name == "cli.noop" and dict(res.envelope.payload) == {"n": 0}
    assert job_id != again.stdout.strip()


def test_enqueue_refuses_a_payload_that_does_not_fit_naming_the_field(
        sqlite: tuple[dict[str, str], JobBridge]) -> None:
    env, bridge = sqlite
    ran = jobbridge("enqueue", "-A", APP, "cli.noop", "--payload", '{"n": "hunter2-secret"}', env=env)
    assert ran.returncode == 2
    assert "does not fit job 'cli.noop': Noop.n: expected int, got a string" in ran.stderr
    assert "hunter2" not in ran.stderr
    for payload, says in [('{"n": 1, "extra": 2}', "1 unknown field(s)"), ("[1]", "a JSON object of the job's"),
                          ("{n: 1}", "not JSON")]:
        refused = jobbridge("enqueue", "-A", APP, "cli.noop", "--payload", payload, env=env)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    unknown = jobbridge("enqueue", "-A", APP, "cli.mails", env=env)
    assert unknown.returncode == 1 and "no job named 'cli.mails' is registered by the app (did you mean cli.mail?)" \
        in errors(unknown)[0]
    assert bridge.driver().counts() == []


def test_purge_deletes_waiting_jobs_and_leaves_the_reserved_one(sqlite: tuple[dict[str, str], JobBridge]) -> None:
    env, bridge = sqlite
    bridge.dispatch_many([cli_app.SendMail() for _ in range(5)])
    bridge.dispatch(cli_app.SendMail(), delay=600)
    bridge.dispatch(cli_app.Report())
    (running,) = bridge.driver().reserve(["mail"], 1)

    declined = jobbridge("purge", "mail", env=env, stdin="n\n")
    assert declined.returncode == 1
    assert "Delete 5 waiting job(s) from mail of sqlite at" in declined.stderr and "Aborted" in declined.stderr
    assert pending(bridge.driver(), "mail") == 6

    ran = jobbridge("purge", "mail", env=env, stdin="y\n")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "purged 5 waiting job(s) from mail"
    assert pending(bridge.driver(), "mail") == 1 and pending(bridge.driver(), "reports") == 1
    bridge.driver().acknowledge([running])
    assert pending(bridge.driver(), "mail") == 0


def test_purge_with_yes_asks_nothing_and_shows_progress_on_a_large_queue(
        sqlite: tuple[dict[str, str], JobBridge]) -> None:
    env, bridge = sqlite
    bridge.dispatch_many([cli_app.Noop(n=i) for i in range(2500)])
    ran = jobbridge("purge", "default", "mail", "--yes", env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "purged 2500 waiting job(s) from default, mail"
    assert "purging" in ran.stderr and "Delete" not in ran.stderr
    assert bridge.driver().counts() == []


def test_purge_on_redis_keeps_the_reserved_entry(tmp_path: Path) -> None:
    url, prefix = ensure_redis(), f"jbpurge{tmp_path.name[-10:]}:"
    bridge = JobBridge(Settings.from_mapping({"redis_url": url, "redis_prefix": prefix}), jobs=cli_app.JOBS)
    try:
        bridge.dispatch_many([cli_app.SendMail() for _ in range(4)])
        bridge.dispatch(cli_app.SendMail(), delay=600)
        (running,) = bridge.driver().reserve(["mail"], 1)
        ran = jobbridge("purge", "mail", "--yes", env={"JOBBRIDGE_REDIS_URL": url, "JOBBRIDGE_REDIS_PREFIX": prefix})
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == "purged 4 waiting job(s) from mail"
        status = json.loads(jobbridge("status", "--json", env={"JOBBRIDGE_REDIS_URL": url,
                                                               "JOBBRIDGE_REDIS_PREFIX": prefix}).stdout)
        (mail,) = [q for q in status["queues"] if q["queue"] == "mail"]
        assert (mail["pending"], mail["reserved"]) == (1, 1)
        bridge.driver().acknowledge([running])
    finally:
        bridge.close()
        drop_keys(url, prefix)
