"""Every exception jobbridge raises, so callers catch ours and never a client library's.

::

    JobBridgeError
    ├── ConfigurationError        boot refused: a missing, unknown or foreign setting
    │   └── RefusedSetting        a setting from another queue library, with what to write instead
    ├── UnknownConnection         a connection name nobody declared
    ├── JobDefinitionError        a job class that cannot be registered (two classes, one name)
    ├── UnknownJob                a job name no module registered (dispatch or run)
    ├── PayloadError
    │   ├── PayloadEncodeError    a payload field that cannot become JSON (raised at dispatch)
    │   │   ├── PayloadTooLarge   an encoded job above its driver's message size limit (raised at dispatch)
    │   │   └── ResultEncodeError a job's return value that cannot be stored (jobbridge.results)
    │   └── PayloadDecodeError    a stored message that cannot become a job again
    ├── UnknownCounter            a chord's join counter that was never set, or expired (jobbridge.results)
    ├── NoFailedJob               retry of an id the failed store does not hold
    ├── NotAFake                  a QueueFake assertion called on a real queue
    ├── DriverError               a store failed (the client's exception is the __cause__)
    │   ├── DriverUnavailable     the store cannot be reached right now; retrying may help
    │   └── StoreRefused          the store refused this data (out of its range, too long); retrying cannot help
    ├── JobTimeout                raised inside an attempt that overran its timeout
    └── JobCancelled              raised inside a running attempt cancelled with terminate=True
"""

from __future__ import annotations


class JobBridgeError(Exception):
    """Base of every jobbridge exception."""


class ConfigurationError(JobBridgeError):
    """The configuration cannot be honoured; raised at boot, never later."""


class RefusedSetting(ConfigurationError):
    """A setting written for another queue library: refused by name, with its replacement."""

    def __init__(self, key: str, why: str, instead: str, where: str = "") -> None:
        self.key, self.why, self.instead = key, why, instead
        place = f" in {where}" if where else ""
        super().__init__(f"setting {key!r}{place} is refused: {why}. Write instead: {instead}")


class UnknownConnection(ConfigurationError):
    """A dispatch or worker named a connection nobody declared."""


class JobDefinitionError(JobBridgeError):
    """A job class is malformed or clashes with another at registration."""


class UnknownJob(JobBridgeError):
    """No registered job has this name or class."""


class PayloadError(JobBridgeError):
    """A payload cannot cross the process boundary."""


class PayloadEncodeError(PayloadError, TypeError):
    """A payload field cannot be encoded as JSON; raised at dispatch, naming the field."""


class PayloadTooLarge(PayloadEncodeError):
    """An encoded job is larger than its driver accepts; raised at dispatch, naming the job, sizes and driver."""


class PayloadDecodeError(PayloadError, ValueError):
    """A stored message cannot be decoded back into its job."""


class NoFailedJob(JobBridgeError, LookupError):
    """A failed store's ``retry`` (``driver.failed.retry``) was given an id that it does not hold."""


class NotAFake(JobBridgeError, AssertionError):
    """A fake-only assertion was called on a real queue, where it would pass vacuously."""


class DriverError(JobBridgeError):
    """A driver's store failed; the client library's exception is chained as ``__cause__``."""


class DriverUnavailable(DriverError):
    """The store cannot be reached now (refused, reset, timed out); the caller may retry."""


class StoreRefused(DriverError):
    """The store refused this data (a value out of its column's range, a name too long for it).

    The same call with the same data fails again, so a caller must not retry it
    as it would a `DriverUnavailable`: the worker gives such an outcome up after
    a few tries instead of holding its batch.
    """


class JobTimeout(JobBridgeError, TimeoutError):
    """An attempt ran past its timeout and was stopped; it counts as a failed attempt."""


class JobCancelled(JobBridgeError):
    """A running attempt was cancelled with ``terminate=True``; the job ends REVOKED, not retried."""
