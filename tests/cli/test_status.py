"""``jobbridge status``: ``--json`` with its documented field names, and ``--watch`` bounded by ``--count``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli import cli_app
from tests.cli.support import APP, jobbridge

CAPABILITIES = {"is_deferred", "survives_a_restart", "needs_a_worker", "may_lose_an_accepted_job", "delayed_push",
                "per_message_release", "ordered_queues", "transactional_push", "blocking_reserve",
                "max_message_bytes", "shared_locks"}


def _store(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    bridge = cli_app.bridge_for(url)
    bridge.dispatch_many([cli_app.SendMail() for _ in range(3)])
    bridge.dispatch(cli_app.SendMail(), delay=600)
    bridge.driver().reserve(["mail"], 1)
    bridge.close()
    return {"JOBBRIDGE_DATABASE_URL": url}


def test_status_json_has_the_documented_fields(tmp_path: Path) -> None:
    ran = jobbridge("status", "-A", APP, "--json", env=_store(tmp_path))
    assert ran.returncode == 0, ran.stderr
    data = json.loads(ran.stdout)
    assert set(data) == {"at", "store", "connection", "driver", "reservation", "queues", "failed", "capabilities",
                         "unworked"}
    assert (data["store"], data["connection"], data["driver"]) == (f"sqlite at {tmp_path / 'jobs.sqlite3'}",
                                                                  "database", "database")
    assert [q["queue"] for q in data["queues"]] == ["default", "mail", "reports", "orders"]
    (mail,) = [q for q in data["queues"] if q["queue"] == "mail"]
    assert mail == {"queue": "mail", "pending": 4, "ready": 2, "delayed": 1, "reserved": 1}
    assert set(data["capabilities"]) == CAPABILITIES and data["capabilities"]["ordered_queues"] is True
    assert data["failed"] == 0 and data["reservation"] == 60.0


def test_status_watch_redraws_until_its_count(tmp_path: Path) -> None:
    env = _store(tmp_path)
    ran = jobbridge("status", "--watch", "--interval", "0.1", "--count", "3", env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.count("store        sqlite at") == 3
    assert ran.stdout.count("ordered queues: yes") == 3 and "priorities" not in ran.stdout
    lines = jobbridge("status", "--json", "--watch", "--interval", "0.1", "--count", "2", env=env).stdout.splitlines()
    assert len(lines) == 2 and all(json.loads(line)["queues"] for line in lines)
