"""Celery's wire on Redis: real Celery 5 (in a venv of its own) and jobbridge share one broker's queues.

Each test gets Redis database 11, flushed, and runs both sides as real processes:
``tests/integration/celery_wire_app.py`` under ``celery worker`` / ``jobbridge worker``,
``tests/integration/celery_wire_client.py`` under either side's Python. The mixed fleet
runs ``WIRE_FLEET_SECONDS`` seconds (8 by default, so the suite stays short; the issue's
two minutes is ``WIRE_FLEET_SECONDS=120``).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.services import _venv, ensure_redis

ROOT = Path(__file__).resolve().parents[2]
URL = "redis://127.0.0.1:6379/11"
CELERY = "celery[redis,sqlalchemy]==5.7.0"  # SQLAlchemy for its database backend (test_celery_wire_database.py)
FLEET_SECONDS = float(os.environ.get("WIRE_FLEET_SECONDS", "8"))


@pytest.fixture(scope="module")
def celery_bin() -> Path:
    return _venv("celery-5.7", CELERY) / "bin"


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    ensure_redis()
    client = redis.Redis.from_url(URL)
    client.flushdb()
    yield client
    client.flushdb()


def _env(side: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBBRIDGE_", "CELERY_"))}
    env.update({"WIRE_URL": URL, "WIRE_SIDE": side, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **extra})
    return env


class Proc:
    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def jobbridge_worker(tmp: Path, name: str = "jbw", **extra: str) -> Proc:
    command = [str(Path(sys.executable).with_name("jobbridge")), "worker", "-A",
               "tests.integration.celery_wire_app:app", "-c", "4", "--sleep", "0.05"]
    return Proc(command, _env("jobbridge", **extra), tmp / f"{name}.log")


def celery_worker(tmp: Path, celery_bin: Path, name: str = "cw", **extra: str) -> Proc:
    command = [str(celery_bin / "celery"), "-A", "tests.integration.celery_wire_app:app", "worker", "-P", "threads",
               "-c", "4", "--without-heartbeat", "--without-mingle", "--without-gossip", "-n", f"{name}@%h"]
    return Proc(command, _env("celery", **extra), tmp / f"{name}.log")


def client(python: Path, side: str, count: int, *shapes: str) -> dict[str, object]:
    done = subprocess.run([str(python), "-m", "tests.integration.celery_wire_client", str(count), *shapes],
                          cwd=ROOT, env=_env(side), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _check_shapes(got: dict[str, object], count: int) -> None:
    assert got["adds"] == [2 * i for i in range(count)]
    assert got["echo"] == [[1, "two", [3]], {"four": {"five": 5}}]
    assert (got["countdown"], got["eta"], got["send_task"]) == (101, 102, 5)
    assert got["retrying"] == 2
    assert got["chain"] == 10
    assert got["group"] == [0, 11, 22, 33]
    assert got["linked"] == 10
    assert got["expired_state"] == "REVOKED"


def _ran(broker: redis.Redis) -> list[str]:
    return [x.decode() for x in broker.lrange("wire:ran", 0, -1)]


def test_celery_client_to_jobbridge_worker(tmp_path: Path, broker: redis.Redis, celery_bin: Path) -> None:
    worker = jobbridge_worker(tmp_path)
    try:
        got = client(celery_bin / "python", "celery", 150)
    finally:
        worker.stop()
    _check_shapes(got, 150)
    ran = _ran(broker)
    assert all(line.endswith("|jobbridge") for line in ran), worker.output()
    assert "mark|celery-linked|jobbridge" in ran and not any("expired" in line for line in ran)
    retries = [x.decode() for x in broker.lrange("wire:flaky:celery-flaky", 0, -1)]
    assert retries == ["0|jobbridge", "1|jobbridge", "2|jobbridge"]


def test_facade_to_celery_worker(tmp_path: Path, broker: redis.Redis, celery_bin: Path) -> None:
    worker = celery_worker(tmp_path, celery_bin)
    try:
        got = client(Path(sys.executable), "jobbridge", 150)
    finally:
        worker.stop()
    _check_shapes(got, 150)
    ran = _ran(broker)
    assert ran and all(line.endswith("|celery") for line in ran), worker.output()
    retries = [x.decode() for x in broker.lrange("wire:flaky:jobbridge-flaky", 0, -1)]
    assert retries == ["0|celery", "1|celery", "2|celery"]


def _kombu_entry(body: bytes, content_type: str, headers: dict[str, object]) -> bytes:
    return json.dumps({"body": base64.b64encode(body).decode(), "content-encoding": "utf-8",
                       "content-type": content_type, "headers": headers,
                       "properties": {"delivery_tag": str(uuid.uuid4()), "body_encoding": "base64",
                                      "delivery_info": {"exchange": "", "routing_key": "celery"}}}).encode()


def test_malformed_and_pickled_messages_are_failed_and_the_worker_goes_on(
        tmp_path: Path, broker: redis.Redis, celery_bin: Path) -> None:
    bad: list[bytes] = []
    for i in range(500):
        headers = {"task": "wire.mark", "id": f"bad-{i}", "retries": 0}
        kind = i % 5
        if kind == 0:  # pickle: never decoded, whatever it would run
            bad.append(_kombu_entry(pickle.dumps(((f"p{i}",), {}, {})), "application/x-python-serialize", headers))
        elif kind == 1:
            bad.append(b"\x80not json at all %d" % i)
        elif kind == 2:
            bad.append(_kombu_entry(b"[1, 2", "application/json", headers))
        elif kind == 3:
            bad.append(_kombu_entry(json.dumps([[f"m{i}"], {}, {}]).encode(), "application/json", {"id": f"x{i}"}))
        else:
            bad.append(json.dumps({"hello": i}).encode())
    for i, entry in enumerate(bad):
        broker.lpush("celery", entry)
        if i % 50 == 0:
            broker.lpush("celery", _kombu_entry(json.dumps([[f"good{i}"], {}, {}]).encode(), "application/json",
                                                {"task": "wire.mark", "id": f"good-{i}", "retries": 0,
                                                 "lang": "py"}))
    worker = jobbridge_worker(tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (broker.llen("celery") or broker.hlen("unacked")):
            time.sleep(0.2)
        time.sleep(1.0)
        assert worker.proc.poll() is None, worker.output()
        show = subprocess.run([str(Path(sys.executable).with_name("jobbridge")), "failed", "--json",
                               "-A", "tests.integration.celery_wire_app:app", "--limit", "1000"],
                              cwd=ROOT, env=_env("jobbridge"), capture_output=True, text=True, timeout=60)
    finally:
        worker.stop()
    assert show.returncode == 0, show.stderr[-2000:]
    failed = json.loads(show.stdout)
    rows = failed if isinstance(failed, list) else failed.get("jobs", failed.get("failed", []))
    assert len(rows) == 500
    errors = [str(r.get("error")) for r in rows]
    assert sum("pickle" in e and "never decoded" in e for e in errors) == 100
    assert all(e for e in errors)
    assert sorted(x for x in _ran(broker)) == sorted(f"mark|good{i}|jobbridge" for i in range(0, 500, 50))


PRODUCER = """
import sys, time, uuid
from tests.integration.celery_wire_app import mark, log
side, seconds = sys.argv[1], float(sys.argv[2])
end, n = time.monotonic() + seconds, 0
while time.monotonic() < end:
    key = f"{side}-{n}"
    log.rpush("wire:sent", key)
    mark.delay(key)
    n += 1
    time.sleep(0.01)
"""


def test_a_mixed_fleet_runs_every_task_and_a_killed_worker_loses_none(
        tmp_path: Path, broker: redis.Redis, celery_bin: Path) -> None:
    vt = {"WIRE_VT": "4"}  # kombu's visibility timeout on both sides: a dead worker's task is back within it
    # tasks that take a little while, and Celery prefetching one: otherwise Celery's BRPOP, served the moment
    # a task is pushed, takes every one while the jobbridge worker polls between them
    busy = {**vt, "WIRE_MARK_SECONDS": "0.05", "WIRE_PREFETCH": "1"}
    fleet = [celery_worker(tmp_path, celery_bin, **busy), jobbridge_worker(tmp_path, **busy)]
    sides = ((celery_bin / "python", "celery"), (Path(sys.executable), "jobbridge"))
    producers = [subprocess.Popen([str(python), "-c", PRODUCER, side, str(FLEET_SECONDS)], cwd=ROOT,
                                  env=_env(side, **vt)) for python, side in sides]
    try:
        for p in producers:
            assert p.wait(FLEET_SECONDS + 60) == 0
        sent = {x.decode() for x in broker.lrange("wire:sent", 0, -1)}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not sent <= {line.split("|")[1] for line in _ran(broker)}:
            time.sleep(0.2)
        runs = Counter(line.split("|")[1] for line in _ran(broker) if line.startswith("mark|"))
        by_side = Counter(line.rsplit("|", 1)[1] for line in _ran(broker))
        duplicates = sum(n - 1 for n in runs.values() if n > 1)
        print(f"\nmixed fleet {FLEET_SECONDS:g}s: sent {len(sent)}, ran {sum(runs.values())} "
              f"(celery {by_side['celery']}, jobbridge {by_side['jobbridge']}), duplicates {duplicates}")
        assert sent and sent <= set(runs), f"lost: {sorted(sent - set(runs))[:20]}"
        assert by_side["celery"] and by_side["jobbridge"]
        # SIGKILL the jobbridge worker in the middle of a task: the task is in kombu's unacked hash, and
        # comes back on the queue when its visibility timeout passes, to whichever worker takes it first
        fleet[0].stop()
        subprocess.run([str(Path(sys.executable)), "-c", "from tests.integration.celery_wire_app import slow; "
                        "slow.delay('killed', 2)"], cwd=ROOT, env=_env("jobbridge", **vt), check=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not broker.lrange("wire:started", 0, -1):
            time.sleep(0.1)
        started = [x.decode() for x in broker.lrange("wire:started", 0, -1)]
        assert started and started[0].startswith("killed|jobbridge|"), fleet[1].output()
        fleet[1].proc.send_signal(signal.SIGKILL)
        fleet[1].proc.wait(10)
        held = {k.decode(): v for k, v in broker.hgetall("unacked").items()}
        assert len(held) == 1 and b'"killed"' in base64.b64decode(json.loads(next(iter(held.values())))[0]["body"])
        print(f"after SIGKILL: the task is in kombu's unacked hash under delivery tag {next(iter(held))}")
        fleet.append(celery_worker(tmp_path, celery_bin, name="cw2", **vt))
        fleet.append(jobbridge_worker(tmp_path, name="jbw2", **vt))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(broker.lrange("wire:started", 0, -1)) < 2:
            time.sleep(0.2)
        again = [x.decode() for x in broker.lrange("wire:started", 0, -1)]
        print(f"the killed task started again: {again[1:]}")
        assert len(again) >= 2 and again[1].startswith("killed|")
    finally:
        for p in producers:
            if p.poll() is None:
                p.kill()
        for worker in fleet:
            worker.stop()



def test_a_chord_split_over_both_sides_joins_once_whoever_sent_it(
        tmp_path: Path, broker: redis.Redis, celery_bin: Path) -> None:
    """A chord whose header runs on a Celery worker and a jobbridge worker at once (tests/integration/
    celery_wire_chords.py): here, because it shares this module's Redis database and its flushes."""
    from tests.integration.celery_wire_chords import split_chord_joins_once

    split_chord_joins_once(tmp_path, broker, celery_bin)
