"""A chord whose header is a generator: each header task sent as the generator yields it (Celery's #3021).

Celery sends a generator's tasks one by one and sets the chord's size once the last is seen
(``group._apply_tasks``, ``backend.set_chord_size``), so the first tasks may run, even finish,
before the generator has produced the last one. The join counter of an ordinary chord
(compat/canvas/chords.py) needs the size when the chord starts, so here:

- before the first task is sent, the chord is marked *sizing* in the result store, with its
  failure counter and a *claim* counter (one) beside it;
- a header task that ends before the size is known stores its result and finds no join counter:
  the sizing mark tells it to leave its count to the sender (compat/running/flow.py);
- once the generator is done, the sender keeps the header's ids, sets the join counter to their
  number and counts down, by each one's id, every result already in (a task that counted itself
  is not counted twice: the store counts a member once);
- whoever takes the counter to 0 — a header task or the sender — takes the claim (a chord of
  this kind can see two of them at 0), and the one that gets it publishes the body. The body
  each header task carries says so (`LAZY`): an ordinary chord's last header task, the only
  one to see 0, joins without that round trip (`joins`).

A failed header task fails the chord as in any chord: its failure counter exists from the start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobbridge.results import SUCCESS, UnknownCounter

from ..ports import AppPort
from ..results.asyncresult import AsyncResult
from .primitives import group
from .signature import Signature

#: the failure counter's key beside the header group's id (as chords.py's), and the join's claim
FAILED, CLAIM = ":failed", ":claim"
#: the member the sender counts as in the claim counter (a header task counts as its own id)
SENDER = "sender"
#: the key, in the body each header task carries (``request.chord``), of a chord sent from a generator
LAZY = "lazy_header"


def send_lazily(app: AppPort, header: group, body: Signature, group_id: str, args: Sequence[Any] | None,
                kwargs: Mapping[str, Any] | None, options: Mapping[str, Any]) -> list[AsyncResult]:
    """Send each header task as it is generated; then size the join and count what is already in."""
    backend = app.backend
    store = backend.require("a chord")
    store.counter_init(group_id + FAILED, 1, backend.ttl)
    store.counter_init(group_id + CLAIM, 1, backend.ttl)
    backend.mark_sizing(group_id)
    results: list[AsyncResult] = []
    for index, member in enumerate(header.each()):
        member = member.clone()  # the chord itself may be applied again
        results.append(member.freeze(group_id=group_id, group_index=index))
        member.apply_async(args, kwargs, **{**options, "group_id": group_id, "group_index": index,
                                            "chord": {**body, LAZY: True}, "add_to_parent": False})
    ids = [r.id for r in results]
    backend.save_group(group_id, ids)
    store.counter_init(group_id, len(ids), backend.ttl)
    done = backend.get_many(ids)
    left = len(ids)
    for task_id in ids:
        if task_id in done and done[task_id].state == SUCCESS:
            left = store.counter_decrement(group_id, member=task_id)
    if left == 0 and claim(app, group_id, SENDER):
        records = backend.get_many(ids)
        if all(i in records and records[i].state == SUCCESS for i in ids):
            body.apply_async(([records[i].result for i in ids],))
            backend.mark_joined(group_id, body.id)
    return results


def joins(app: AppPort, chord_body: Mapping[str, Any], group_id: str, member: str) -> bool:
    """Whether header task ``member``, which took the join counter to 0, is the one to publish the body.

    An ordinary chord's counter is at 0 for its last header task only, so it joins with no store
    call; one sent from a generator (its body marked `LAZY`) may see the sender at 0 too: it claims.
    """
    return not chord_body.get(LAZY) or claim(app, group_id, member)


def claim(app: AppPort, group_id: str, member: str) -> bool:
    """Whether ``member``, which found a generator header's join counter at 0, is the one to publish the body.

    A claim counter that is gone (expired with the chord's other keys) leaves the join to the first that asks.
    """
    try:
        return app.backend.require("a chord").counter_decrement(group_id + CLAIM, member=member) == 0
    except UnknownCounter:
        return True


__all__ = ["LAZY", "claim", "joins", "send_lazily"]
