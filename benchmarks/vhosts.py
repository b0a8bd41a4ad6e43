"""RabbitMQ for the benchmarks: a vhost per library on the shared node, made for a run and deleted after.

Each library's queues, exchanges and delay stages live in a vhost of its own
(``jbbench-<library>``), so emptying it never touches another library's or the
test suite's: the harness deletes and recreates that vhost with
``rabbitmqctl`` (every queue in it goes with it) and deletes it at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess

RABBIT = os.environ.get("JB_BENCH_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672").rstrip("/")
USER = os.environ.get("JB_BENCH_RABBITMQ_USER", "guest")


def vhost_of(library: str) -> str:
    return f"jbbench-{library}"


def amqp_url(library: str) -> str:
    """The URL of ``library``'s own vhost on the benchmark's RabbitMQ."""
    return f"{RABBIT}/{vhost_of(library)}"


def _ctl(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("rabbitmqctl") is None:
        raise RuntimeError("rabbitmqctl is not on PATH: the RabbitMQ benchmark makes a vhost per library with it")
    return subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=120, check=False)


def fresh_vhost(library: str) -> None:
    """Delete ``library``'s vhost (with every queue in it) and make it again, empty."""
    name = vhost_of(library)
    _ctl("delete_vhost", name)  # absent the first time: that is fine
    made = _ctl("add_vhost", name)
    if made.returncode != 0:
        raise RuntimeError(f"rabbitmqctl add_vhost {name} failed: {made.stderr.strip()[:200]}")
    _ctl("set_permissions", "-p", name, USER, ".*", ".*", ".*")


def drop_vhost(library: str) -> None:
    _ctl("delete_vhost", vhost_of(library))


def rabbitmq_version() -> str:
    done = _ctl("eval", "rabbit_misc:version().")
    return done.stdout.strip().strip('"') if done.returncode == 0 else "?"
