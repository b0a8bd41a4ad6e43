"""`landing`: call a handler at one chosen instruction of a wake's own methods, as a signal handler can land.

A POSIX signal's Python handler runs on the main thread between any two
bytecodes. To test every such moment rather than the few a real signal happens
to hit, `landing` traces the calling thread with opcode events and calls the
handler at the ``k``-th instruction executed in ``wake``'s ``set``, ``clear``,
``wait`` and ``is_set`` (on that wake object, whatever its class), once. Run the
test in a fresh process (`tests.fresh_process`, which says why).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

METHODS = ("set", "clear", "wait", "is_set")


class Landed:
    """Whether the handler was called (the operation reached the ``k``-th instruction)."""

    fired = False


@contextlib.contextmanager
def landing(wake: object, k: int, handler: Callable[[], object]) -> Iterator[Landed]:
    methods = {getattr(type(wake), name).__code__ for name in METHODS}
    landed, seen = Landed(), 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal seen
        if event == "opcode":
            if seen == k:
                landed.fired = True
                sys.settrace(None)  # the handler's own calls are not counted
                handler()
            seen += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code not in methods or frame.f_locals.get("self") is not wake:
            return None
        frame.f_trace_opcodes = True
        return local

    sys.settrace(tracer)
    try:
        yield landed
    finally:
        sys.settrace(None)
