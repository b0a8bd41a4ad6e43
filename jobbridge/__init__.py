"""jobbridge: class-based background jobs over a real reservation protocol.

The public API is this module's ``__all__``; a test keeps it that way.
"""

from jobbridge.app import JobBridge
from jobbridge.backoff import Backoff
from jobbridge.clock import Clock, SystemClock
from jobbridge.container import Container
from jobbridge.context import JobContext
from jobbridge.drivers.base import Capabilities, Driver
from jobbridge.envelope import Envelope, Reservation
from jobbridge.errors import (
    ConfigurationError,
    DriverError,
    DriverUnavailable,
    JobBridgeError,
    JobDefinitionError,
    JobTimeout,
    NoFailedJob,
    NotAFake,
    PayloadDecodeError,
    PayloadEncodeError,
    PayloadTooLarge,
    RefusedSetting,
    StoreRefused,
    UnknownConnection,
    UnknownJob,
)
from jobbridge.execution import Middleware
from jobbridge.job import Job, JobOptions, job
from jobbridge.outcome import AcknowledgeJob, FailJob, ReleaseJob, WorkStats
from jobbridge.rate_limits import RateLimit
from jobbridge.settings import ConnectionSettings, Settings
from jobbridge.store_reports import FailedJob, QueueCounts

__version__ = "0.1.0"

__all__ = [
    "AcknowledgeJob",
    "Backoff",
    "Capabilities",
    "Clock",
    "ConfigurationError",
    "ConnectionSettings",
    "Container",
    "Driver",
    "DriverError",
    "DriverUnavailable",
    "Envelope",
    "FailJob",
    "FailedJob",
    "Job",
    "JobBridge",
    "JobBridgeError",
    "JobContext",
    "JobDefinitionError",
    "JobOptions",
    "JobTimeout",
    "Middleware",
    "NoFailedJob",
    "NotAFake",
    "PayloadDecodeError",
    "PayloadEncodeError",
    "PayloadTooLarge",
    "QueueCounts",
    "RateLimit",
    "RefusedSetting",
    "ReleaseJob",
    "Reservation",
    "Settings",
    "StoreRefused",
    "SystemClock",
    "UnknownConnection",
    "UnknownJob",
    "WorkStats",
    "job",
]
