"""One Celery app, run by real Celery (``WIRE_SIDE=celery``, in its own venv) and by the facade (the default).

The module imports ``celery`` or ``jobbridge.compat`` by that variable and nothing else of
either, so the same tasks, by the same names, run on both sides of one broker
(``WIRE_BROKER``: a Redis database of the test's own, ``WIRE_URL``, or a RabbitMQ vhost; results on
``WIRE_BACKEND``, that Redis unless set). Each run is recorded in Redis
(``wire:ran``: ``task|key|side``), so a test counts what ran where and how often.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis

SIDE = os.environ.get("WIRE_SIDE", "jobbridge")
if SIDE == "celery":
    from celery import Celery
else:
    from jobbridge.compat import Celery

URL = os.environ["WIRE_URL"]
#: the broker: the same Redis, or RabbitMQ (``WIRE_BROKER``, a vhost of the test's own); results stay on Redis
BROKER = os.environ.get("WIRE_BROKER", URL)
#: the result backend: the same Redis, or a database (``WIRE_BACKEND``, ``db+...``, Celery's database backend)
BACKEND = os.environ.get("WIRE_BACKEND", URL)
app = Celery("wire", broker=BROKER, backend=BACKEND)
app.conf.update(result_expires=600)
if BROKER.startswith("redis"):  # RabbitMQ has no visibility timeout (the facade refuses one there)
    app.conf.broker_transport_options = {"visibility_timeout": float(os.environ.get("WIRE_VT", "3600"))}
if SIDE != "celery":
    app.conf.jobbridge_wire = "celery"
elif os.environ.get("WIRE_PREFETCH"):  # a Celery worker that takes one message per thread, leaving the rest
    app.conf.worker_prefetch_multiplier = int(os.environ["WIRE_PREFETCH"])
#: seconds each ``mark`` takes (a fleet whose workers are busy, so both sides get a share of a queue)
MARK_SECONDS = float(os.environ.get("WIRE_MARK_SECONDS", "0"))
log = redis.Redis.from_url(URL)


def _ran(task: str, key: Any) -> None:
    log.rpush("wire:ran", f"{task}|{key}|{SIDE}")


@app.task(name="wire.add")
def add(x: int, y: int) -> int:
    _ran("add", f"{x}+{y}")
    return x + y


@app.task(name="wire.echo")
def echo(*args: Any, **kwargs: Any) -> list[Any]:
    _ran("echo", len(args))
    return [list(args), kwargs]


@app.task(name="wire.tsum")
def tsum(values: list[int]) -> int:
    _ran("tsum", len(values))
    return sum(values)


@app.task(name="wire.mark")
def mark(key: str) -> str:
    if MARK_SECONDS:
        time.sleep(MARK_SECONDS)
    _ran("mark", key)
    return key


@app.task(name="wire.flaky", bind=True, max_retries=5)
def flaky(self: Any, key: str, times: int) -> int:
    log.rpush(f"wire:flaky:{key}", f"{self.request.retries}|{SIDE}")
    if self.request.retries < times:
        raise self.retry(countdown=0.2)
    return int(self.request.retries)


@app.task(name="wire.slow")
def slow(key: str, seconds: float) -> str:
    log.rpush("wire:started", f"{key}|{SIDE}|{os.getpid()}")
    time.sleep(seconds)
    _ran("slow", key)
    return key


@app.task(name="wire.collect")
def collect(values: list[int], key: str) -> int:
    """A chord's body: records its key, so a test counts how often each chord's body ran."""
    _ran("collect", key)
    return sum(values)


@app.task(name="wire.boom")
def boom(key: str) -> None:
    _ran("boom", key)
    raise ValueError(f"boom {key}")
