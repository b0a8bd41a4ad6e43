"""The consumer-timeout rule: no job may run longer than RabbitMQ lets a delivery stay unacknowledged.

RabbitMQ closes the whole channel of a delivery held past its ``consumer_timeout``
(30 minutes by default), and every job that channel held runs again. So at a
worker's start (`JobChecking.check_jobs`) a job whose timeout, plus one
reservation to settle it in, exceeds the broker's cut-off is refused, saying what
to configure; a job without a timeout starts, with a warning naming it.
See docs/rabbitmq.md, "The consumer timeout".
"""

from __future__ import annotations

from collections.abc import Sequence

from jobbridge.drivers.base import JobLimits
from jobbridge.errors import ConfigurationError


def longest_job(cut_off: float, reservation: float) -> float:
    """The longest timeout a job may have here: the broker's cut-off less one lease to settle in."""
    return cut_off - reservation


def check_jobs(cut_off: float, reservation: float, jobs: Sequence[JobLimits]) -> list[str]:
    """Refuse a job whose timeout ``cut_off`` (the broker's consumer_timeout, 0: none) would cut short; one
    warning line for each job without a timeout, which it may cut short."""
    if not cut_off:
        return []
    warnings = []
    for job in jobs:
        if job.timeout is None:
            warnings.append(_unlimited(job.name, cut_off, reservation))
        elif job.timeout > longest_job(cut_off, reservation):
            raise ConfigurationError(
                f"job {job.name!r} may run {job.timeout:g} s, but RabbitMQ closes the channel of a delivery held "
                f"longer than consumer_timeout = {cut_off:g} s, and its worker needs one reservation "
                f"({reservation:g} s) to settle it: every job on that channel would run again. Raise "
                "consumer_timeout on the server (rabbitmq.conf: consumer_timeout = <ms>) and in this connection's "
                "consumer_timeout setting (0 where the server's is disabled), or give the job a timeout of at most "
                f"{longest_job(cut_off, reservation):g} s (a Celery task: time_limit, or task_time_limit for every "
                "task)")
    return warnings


def _unlimited(name: str, cut_off: float, reservation: float) -> str:
    return (f"job {name!r} has no time limit, and RabbitMQ closes the channel of a delivery held longer than "
            f"consumer_timeout = {cut_off:g} s: an attempt that runs longer loses its delivery, and the job (with "
            "every other job that worker is running) runs again. Give it a timeout of at most "
            f"{longest_job(cut_off, reservation):g} s (a Celery task: time_limit, or task_time_limit for every "
            "task), or raise consumer_timeout on the server and in this connection's consumer_timeout setting (0 "
            "where the server's is disabled)")
