"""A client of tests/integration/celery_wire_app.py, run on either side: sends every shape, reads the results.

``python -m tests.integration.celery_wire_client N`` prints one JSON object: what each
shape gave back (``AsyncResult.get()`` through the side's own result backend). It runs
under real Celery (``WIRE_SIDE=celery``) and under the facade alike.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.integration.celery_wire_app import SIDE, add, app, boom, collect, echo, flaky, mark, tsum

if SIDE == "celery":
    from celery import chain, chord, group
else:
    from jobbridge.compat import chain, chord, group

WAIT = 30.0


def _outcome(result: Any) -> Any:
    try:
        return result.get(timeout=WAIT)
    except Exception as exc:  # the shape's failure is part of what is reported
        return f"raised {type(exc).__name__}: {str(exc)[:200]}"


#: the queues a chord's header is split over: one a jobbridge worker works, one a Celery worker works
SPLIT = ("wire-jb", "wire-cw")


def main(count: int) -> dict[str, Any]:
    if "few" in sys.argv[2:]:
        return few(count)
    if "chords" in sys.argv[2:]:
        return chords(count)
    sent = [add.delay(i, i) for i in range(count)]
    shapes: dict[str, Any] = {
        "echo": echo.apply_async((1, "two", [3]), {"four": {"five": 5}}),
        "countdown": add.apply_async((100, 1), countdown=1),
        "eta": add.apply_async((100, 2), eta=datetime.now(UTC) + timedelta(seconds=1)),
        "send_task": app.send_task("wire.add", (2, 3)),
        "retrying": flaky.delay(f"{SIDE}-flaky", 2),
        "chain": chain(add.s(1, 2), add.s(3), add.s(4)).apply_async(),
        "group": group(add.s(i, 10 * i) for i in range(4)).apply_async(),
        "linked": add.apply_async((5, 5), link=mark.si(f"{SIDE}-linked")),
    }
    if len(sys.argv) > 2 and "chord" in sys.argv[2:]:
        shapes["chord"] = chord([add.s(i, i) for i in range(4)], tsum.s()).apply_async()
    expired = mark.apply_async((f"{SIDE}-expired",), expires=datetime.now(UTC) - timedelta(seconds=5))
    out: dict[str, Any] = {"adds": [_outcome(r) for r in sent]}
    out.update({name: _outcome(r) for name, r in shapes.items()})
    time.sleep(1.0)
    out["expired_state"] = expired.state
    out["ids"] = {"expired": expired.id}
    return out


def few(count: int) -> dict[str, Any]:
    """A handful of shapes (args, countdown, a retry, a chain), for the RabbitMQ run."""
    sent = [add.delay(i, i) for i in range(count)]
    shapes = {"echo": echo.apply_async((1, "two", [3]), {"four": {"five": 5}}),
              "countdown": add.apply_async((100, 1), countdown=1),
              "retrying": flaky.delay(f"{SIDE}-flaky", 2),
              "chain": chain(add.s(1, 2), add.s(3), add.s(4)).apply_async()}
    out: dict[str, Any] = {"adds": [_outcome(r) for r in sent]}
    out.update({name: _outcome(r) for name, r in shapes.items()})
    return out


def chords(first: int) -> dict[str, Any]:
    """Chords whose header tasks go half to each side's queue (adds of ``first``..``first+3``); bodies on either."""
    header = [add.s(i, i).set(queue=SPLIT[i % 2]) for i in range(first, first + 4)]
    ok = chord(header, collect.s(f"{SIDE}-chord")).apply_async()
    parts = [add.s(1, 1).set(queue=SPLIT[0]), boom.si(f"{SIDE}-part").set(queue=SPLIT[1])]
    failing = chord(parts, collect.s(f"{SIDE}-failing")).apply_async()
    out = {"chord": _outcome(ok), "failing": _outcome(failing), "ok_group": ok.parent.id}
    body = app.AsyncResult(failing.id)
    deadline = time.monotonic() + WAIT
    while body.state != "FAILURE" and time.monotonic() < deadline:  # stored when the last part is in
        time.sleep(0.1)
    out["failing_body"] = f"{body.state} {type(body.result).__name__}: {body.result}"
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
