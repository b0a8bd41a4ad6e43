"""Chords across sides on Celery's wire: a chord's header tasks run on a Celery worker and a jobbridge worker at once.

Each chord's header is split over two queues, ``wire-jb`` (worked by a jobbridge worker only)
and ``wire-cw`` (a Celery worker only); both work ``celery``, where the body goes. A Celery
client and a facade client each send a chord that must join and one whose part raises, at the
same time, on one Redis database (11, flushed). The harness is tests/integration/test_celery_wire.py's,
which runs this scenario as one of its own tests: it shares that module's database and flushes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import redis

from tests.integration import test_celery_wire as harness


def split_chord_joins_once(tmp_path: Path, broker: redis.Redis, celery_bin: Path) -> None:
    """The scenario, run by test_celery_wire.py on its own database and fixtures (never beside that module)."""
    jobbridge = harness.Proc([str(Path(sys.executable).with_name("jobbridge")), "worker", "-A",
                              "tests.integration.celery_wire_app:app", "-c", "4", "--sleep", "0.05",
                              "-Q", "wire-jb,celery"], harness._env("jobbridge"), tmp_path / "jbw.log")
    celery = harness.Proc([str(celery_bin / "celery"), "-A", "tests.integration.celery_wire_app:app", "worker",
                           "-P", "threads", "-c", "4", "--without-heartbeat", "--without-mingle",
                           "--without-gossip", "-n", "cw@%h", "-Q", "wire-cw,celery"],
                          harness._env("celery"), tmp_path / "cw.log")
    clients = {side: subprocess.Popen([str(python), "-m", "tests.integration.celery_wire_client", str(first),
                                       "chords"], cwd=harness.ROOT, env=harness._env(side), text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for side, python, first in (("celery", celery_bin / "python", 0),
                                           ("jobbridge", Path(sys.executable), 10))}
    try:
        outs = {side: c.communicate(timeout=120) for side, c in clients.items()}
    finally:
        jobbridge.stop()
        celery.stop()  # a warm stop: the side that published a body deletes its chord's keys after it
    for side, (_, err) in outs.items():
        assert clients[side].returncode == 0, err[-3000:] + jobbridge.output() + celery.output()
    got = {side: json.loads(out.strip().splitlines()[-1]) for side, (out, _) in outs.items()}
    ran = harness._ran(broker)
    print(f"\nchords across sides: {got}")
    assert got["celery"]["chord"] == 2 * sum(range(0, 4))
    assert got["jobbridge"]["chord"] == 2 * sum(range(10, 14))
    for side in got:  # the failing chord: get() raises the failed part's error, as Celery's does, and the body,
        # which never ran, is stored as the chord's error by whichever side took the last part in
        assert got[side]["failing"] == f"raised ValueError: boom {side}-part", got
        assert got[side]["failing_body"].startswith("FAILURE ChordError: Dependency"), got
        assert f"boom {side}-part" in got[side]["failing_body"], got
    header_sides = {line.rsplit("|", 1)[1] for line in ran if line.startswith("add|")}
    assert header_sides == {"celery", "jobbridge"}, ran
    bodies = Counter(line.rsplit("|", 1)[0] for line in ran if line.startswith("collect|"))
    assert bodies == {"collect|celery-chord": 1, "collect|jobbridge-chord": 1}, ran  # the failing ones: never
    # a joined chord leaves no parts behind (a failed one keeps them until they expire, on either side, as
    # Celery's backend keeps them)
    assert [side for side in got if broker.exists(f"celery-taskset-meta-{got[side]['ok_group']}.j")] == []
