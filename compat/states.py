"""Celery's task state names (``celery.states``), for code that compares against them."""

from __future__ import annotations

PENDING = "PENDING"
RECEIVED = "RECEIVED"
STARTED = "STARTED"
SUCCESS = "SUCCESS"
FAILURE = "FAILURE"
REVOKED = "REVOKED"
REJECTED = "REJECTED"
RETRY = "RETRY"
IGNORED = "IGNORED"

READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})
UNREADY_STATES = frozenset({PENDING, RECEIVED, STARTED, REJECTED, RETRY})
EXCEPTION_STATES = frozenset({RETRY, FAILURE, REVOKED})
PROPAGATE_STATES = frozenset({FAILURE, REVOKED})
ALL_STATES = frozenset({PENDING, RECEIVED, STARTED, SUCCESS, FAILURE, RETRY, REVOKED})

# From least to most advanced; an unknown state sorts as PENDING.
_ORDER = [SUCCESS, FAILURE, REVOKED, STARTED, REJECTED, RETRY, RECEIVED, PENDING]


def precedence(state: str | None) -> int:
    """A state's place in the order above (lower is further along)."""
    try:
        return _ORDER.index(state) if state is not None else _ORDER.index(PENDING)
    except ValueError:
        return _ORDER.index(PENDING)


class state(str):
    """A state name that compares by precedence: ``state(SUCCESS) > state(PENDING)``."""

    def __gt__(self, other: object) -> bool:
        return precedence(self) < precedence(str(other))

    def __ge__(self, other: object) -> bool:
        return precedence(self) <= precedence(str(other))

    def __lt__(self, other: object) -> bool:
        return precedence(self) > precedence(str(other))

    def __le__(self, other: object) -> bool:
        return precedence(self) >= precedence(str(other))

    __hash__ = str.__hash__


__all__ = [
    "ALL_STATES", "EXCEPTION_STATES", "FAILURE", "IGNORED", "PENDING", "PROPAGATE_STATES", "READY_STATES",
    "RECEIVED", "REJECTED", "RETRY", "REVOKED", "STARTED", "SUCCESS", "UNREADY_STATES", "precedence", "state",
]
