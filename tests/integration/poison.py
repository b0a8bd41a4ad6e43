"""The poison-message harness every driver's poison test shares: bad messages, a real worker, the verdict.

A *poison message* is a stored message that cannot become a job: invalid JSON,
an envelope with missing or mistyped fields, an unknown job name, a payload
whose field decode raises, counts and times no sane dispatch wrote. The
promise tested: each one ends in the failed store exactly once, with a reason
naming what was wrong (and never quoting a payload value), while the good jobs
around it each run exactly once and the worker keeps going.

What a driver's test does with it:

1. write `poison_bodies` (envelope-level poison, by kind) straight into its
   store, each beside good `poison_app.Good` jobs dispatched through a bridge,
   plus poison of its own (a column out of range, a body of the wrong type)
   described by its own `Expect` entries;
2. `start_worker`: one real ``jobbridge worker`` subprocess on the queues,
   with ``--stop-when-empty``, recording runs through ``JB_REL_RUNS``
   (`reliability_support.FileRunsReader` gives the variable and reads runs back);
3. `assert_outcome` with the good ids, the bad ids (the store's id of each bad
   message, by kind), the runs, the failed store's rows and the exit status.

Some kinds are not poison for every store: a database keeps the attempt count
in a column and never reads the body's, a clamped timeout is a job that runs.
Their `Expect` is ``either``: the message ran exactly once, or it is in the
failed store exactly once with a reason; never both, never twice.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from jobbridge.envelope import new_id
from jobbridge.store_reports import FailedJob
from tests.integration.poison_app import GOOD, TYPED
from tests.integration.reliability_support import Run, Workers, times_run

APP = "tests.integration.poison_app:make_bridge"
#: good jobs beside each poison message
GOOD_PER_KIND = 50
#: a payload value that must never reach a stored reason (it is the "secret" of the payload)
SECRET = 424242424242
#: ten megabytes of payload: a message far larger than any sane job
HUGE = 10 * 1024 * 1024
#: a job name longer than any store's name column (191 characters on the database driver)
LONG_NAME = "poison." + "x" * 293


@dataclass(frozen=True)
class Expect:
    """What must become of one kind of poison: fail (failed store), run (exactly once), or either."""

    outcome: Literal["fail", "run", "either"]
    #: lower-case fragments; a stored reason must contain at least one
    reason: tuple[str, ...] = ()


#: every kind `poison_bodies` makes, and what must become of it
EXPECT: dict[str, Expect] = {
    "invalid_json": Expect("fail", ("json",)),
    "not_an_object": Expect("fail", ("object",)),
    "unknown_version": Expect("fail", ("version", "format")),
    "missing_fields": Expect("fail", ("missing", "name", "payload", "tries")),
    "extra_payload_field": Expect("fail", ("field",)),
    "extra_envelope_field": Expect("either", ("field",)),
    "id_not_a_string": Expect("fail", ("id",)),
    "name_not_a_string": Expect("fail", ("name",)),
    "tries_not_an_int": Expect("fail", ("tries",)),
    "payload_not_an_object": Expect("fail", ("payload",)),
    "field_wrong_type": Expect("fail", ("int", "n")),
    "unknown_name": Expect("fail", ("unknown", "registered")),
    "non_utf8": Expect("fail", ("utf",)),
    "huge_body": Expect("fail", ("field", "size", "large", "bytes", "limit")),
    "huge_attempts": Expect("either", ("attempts",)),
    "negative_attempts": Expect("either", ("attempts",)),
    "huge_timeout": Expect("either", ("timeout",)),
    "nan_time": Expect("fail", ("json", "nan", "available_at", "time")),
    "infinite_time": Expect("fail", ("json", "infinity", "available_at", "time")),
    "huge_time": Expect("either", ("created_at", "time")),
    "far_past_available_at": Expect("run"),
    "unique_key_not_a_string": Expect("either", ("unique",)),
    "uuid_field_holds_int": Expect("fail", ("ref", "uuid")),
    "long_name": Expect("fail", ("unknown", "registered", "name")),
}


def envelope(*, id: str, queue: str, name: str = GOOD, **changes: Any) -> dict[str, Any]:
    """A well-formed stored envelope of a `Good` job, as a dict to spoil; ``changes`` override fields."""
    now = time.time()
    body: dict[str, Any] = {
        "v": 1, "id": id, "name": name, "queue": queue, "payload": {"n": 7}, "tries": 3, "timeout": 60.0,
        "available_at": now, "created_at": now, "attempts": 0, "unique_key": None, "unique_for": None,
        "headers": {},
    }
    body.update(changes)
    return body


def _dumps(body: Mapping[str, Any]) -> bytes:
    return orjson.dumps(body)


def _without(body: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in names}


Env = Callable[..., dict[str, Any]]


def _spoiled(env: Env, field: str, literal: bytes) -> bytes:
    """A body with ``literal`` as ``field``'s value: orjson writes neither NaN, infinity nor a 70-bit integer."""
    key = field.encode()
    return _dumps(env(**{field: 1.5})).replace(b'"%s":1.5' % key, b'"%s":%s' % (key, literal))


#: how each kind's body is made from ``env`` (a well-formed envelope dict, with changes)
_MAKERS: dict[str, Callable[[Env], bytes]] = {
    "invalid_json": lambda env: _dumps(env())[:-7],
    "not_an_object": lambda env: b"[1, 2, 3]",
    "unknown_version": lambda env: _dumps(env(v=99)),
    "missing_fields": lambda env: _dumps(_without(env(), "name", "payload", "tries")),
    "extra_payload_field": lambda env: _dumps(env(payload={"n": 7, "surplus": SECRET})),
    "extra_envelope_field": lambda env: _dumps(env(colour="red")),
    "id_not_a_string": lambda env: _dumps(env(id=12345)),
    "name_not_a_string": lambda env: _dumps(env(name=[GOOD])),
    "tries_not_an_int": lambda env: _dumps(env(tries="three")),
    "payload_not_an_object": lambda env: _dumps(env(payload=[7])),
    "field_wrong_type": lambda env: _dumps(env(payload={"n": "seven"})),
    "unknown_name": lambda env: _dumps(env(name="poison.nobody")),
    "non_utf8": lambda env: _dumps(env(name="poison.NOTUTF8")).replace(b"NOTUTF8", b"\xff\xfe\xfd"),
    "huge_body": lambda env: _dumps(env(payload={"n": 7, "blob": "x" * HUGE})),
    "huge_attempts": lambda env: _spoiled(env, "attempts", b"%d" % 2**70),
    "negative_attempts": lambda env: _dumps(env(attempts=-5)),
    "huge_timeout": lambda env: _dumps(env(timeout=1e12)),
    "nan_time": lambda env: _spoiled(env, "available_at", b"NaN"),
    "infinite_time": lambda env: _spoiled(env, "available_at", b"1e400"),
    "huge_time": lambda env: _dumps(env(created_at=1e300)),
    "far_past_available_at": lambda env: _dumps(env(available_at=1.0, created_at=1.0)),
    "unique_key_not_a_string": lambda env: _dumps(env(unique_key={"key": [1, 2]}, unique_for=60.0)),
    "uuid_field_holds_int": lambda env: _dumps(env(name=TYPED, payload={"n": 7, "ref": SECRET})),
    "long_name": lambda env: _dumps(env(name=LONG_NAME)),
}


def poison_bodies(queue: str = "poison", id: str | None = None,
                  kinds: Iterable[str] | None = None) -> dict[str, bytes]:
    """One stored body of each kind in `EXPECT` (or of ``kinds`` only), by kind.

    Where a body carries an id it is ``id`` (a fresh one per kind when None):
    write the message under that same id, so that a kind that runs is counted
    against it. ``queue`` is the queue written into the bodies that name one.
    """
    def env(**changes: Any) -> dict[str, Any]:
        return {**envelope(id=id or new_id(), queue=queue), **changes}

    return {kind: _MAKERS[kind](env) for kind in (EXPECT if kinds is None else kinds)}


def start_worker(workers: Workers, queues: Sequence[str], *args: str) -> subprocess.Popen[bytes]:
    """One ``jobbridge worker`` on the poison app, working ``queues`` until they are empty."""
    return workers.start("--queue", ",".join(queues), "--stop-when-empty", *args, app=APP)


def _judge(kind: str, expect: Expect, ran: int, failed: FailedJob | None) -> str | None:
    """What is wrong with one bad message's fate, or None."""
    if failed is not None and expect.reason and not any(f in failed.error.lower() for f in expect.reason):
        return f"{kind}: failed with a reason naming none of {expect.reason}: {failed.error[:300]!r}"
    if failed is not None and str(SECRET) in failed.error:
        return f"{kind}: the stored reason quotes a payload value: {failed.error[:300]!r}"
    if ran > 1 or (ran and failed is not None):
        return f"{kind}: ran {ran} time(s){' and failed' if failed else ''}"
    if expect.outcome == "fail" and failed is None:
        return f"{kind}: not in the failed store (ran {ran} time(s))"
    if expect.outcome == "run" and ran != 1:
        return f"{kind}: ran {ran} time(s), not once{' (failed: ' + failed.error[:200] + ')' if failed else ''}"
    if expect.outcome == "either" and not ran and failed is None:
        return f"{kind}: neither ran nor failed"
    return None


def assert_outcome(*, good: Iterable[str], bad: Mapping[str, str], runs: Iterable[Run],
                   failed: Iterable[FailedJob], exit_code: int, output: str = "",
                   expect: Mapping[str, Expect] = EXPECT) -> None:
    """Every good job ran once, every bad one met its `Expect` (by kind), and the worker exited 0.

    ``bad`` maps the store's id of each bad message to its kind; ``failed`` is
    the failed store's rows (all of them); ``output`` is the worker's log,
    quoted when something is wrong.
    """
    ran = times_run(runs)
    failures = list(failed)
    stored = Counter(f.id for f in failures)
    by_id = {f.id: f for f in failures}
    problems = [f"{job_id}: in the failed store {n} times" for job_id, n in stored.items() if n > 1]
    good_ids = list(good)
    wrong = [job_id for job_id in good_ids if ran[job_id] != 1 or job_id in by_id]
    if wrong:
        problems.append(f"{len(wrong)} of {len(good_ids)} good jobs did not run exactly once, e.g. "
                        f"{[(i, ran[i], by_id[i].error[:200] if i in by_id else None) for i in wrong[:3]]}")
    for job_id, kind in bad.items():
        problem = _judge(kind, expect[kind], ran[job_id], by_id.get(job_id))
        if problem:
            problems.append(f"{problem} [id {job_id}]")
    strays = set(by_id) - set(bad)
    if strays:
        problems.append(f"{len(strays)} unexpected failed job(s): {[by_id[i].error[:200] for i in list(strays)[:3]]}")
    if exit_code != 0:
        problems.append(f"the worker exited with status {exit_code}")
    assert not problems, "\n".join(problems) + (f"\n--- worker output (end) ---\n{output[-4000:]}" if output else "")
