"""The app the amqp reliability tests run under `jobbridge worker -A tests.integration.amqp_app:make_bridge`.

The jobs are reliability_app's (each run recorded in ``JB_REL_RUNS``); the
connections (RabbitMQ, and Redis as its shared store) come from ``JB_AMQP_*``
variables, because a connections section cannot be written in ``JOBBRIDGE_*``
variables and the workers run in the shared checkout, where no test may leave
a jobbridge.toml.
"""

from __future__ import annotations

import os
from typing import Any

from jobbridge import JobBridge
from jobbridge.settings import Settings
from tests.integration.reliability_app import ALL


def settings_mapping(environ: Any = None) -> dict[str, Any]:
    env = os.environ if environ is None else environ
    return {
        "reservation": float(env.get("JB_AMQP_RESERVATION", "10")),
        "connections": {
            "default": "rabbit",
            "rabbit": {"driver": "amqp", "url": env["JB_AMQP_URL"], "prefix": env["JB_AMQP_PREFIX"],
                       "locks": "shared", "delay_scale": float(env.get("JB_AMQP_DELAY_SCALE", "1")),
                       "consumer_timeout": float(env.get("JB_AMQP_CONSUMER_TIMEOUT", "1800")),
                       "request_timeout": float(env.get("JB_AMQP_REQUEST_TIMEOUT", "10"))},
            "shared": {"driver": "redis", "url": env["JB_AMQP_REDIS_URL"], "prefix": env["JB_AMQP_REDIS_PREFIX"]},
        },
    }


def make_bridge() -> JobBridge:
    return JobBridge(Settings.from_mapping(settings_mapping()), jobs=ALL)
