"""RabbitMQ for the amqp tests: a vhost of a test's own on the shared node, and nodes of a test's own.

A vhost is made with ``rabbitmqctl`` and deleted after, taking every queue and
exchange in it; where ``rabbitmqctl`` cannot reach the node, tests share ``/``
under a queue prefix of their own and delete the queues they declared.

`OwnNode` starts a RabbitMQ node apart from the shared one (its own node name,
AMQP and distribution ports, data directory, no management listener), for the
tests that restart or stop a broker, or that need a ``consumer_timeout`` of
their own: the shared node is never restarted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.services import ensure_rabbitmq, port_open, unavailable, wait_for_port


def rabbitmqctl(*args: str, node: str | None = None, env: dict[str, str] | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = ["rabbitmqctl", *(["-n", node] if node else []), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def have_rabbitmqctl() -> bool:
    return shutil.which("rabbitmqctl") is not None and rabbitmqctl("list_vhosts", timeout=30).returncode == 0


@contextmanager
def fresh_vhost() -> Iterator[str | None]:
    """A new vhost on the shared node (its name), deleted after; None where rabbitmqctl cannot make one."""
    ensure_rabbitmq()
    if not have_rabbitmqctl():
        yield None
        return
    name = f"jbtest-{uuid.uuid4().hex[:10]}"
    made = rabbitmqctl("add_vhost", name)
    assert made.returncode == 0, made.stderr
    rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    try:
        yield name
    finally:
        rabbitmqctl("delete_vhost", name)


def _owned_by_the_server(base: Path) -> None:
    """Run as root, rabbitmq-server drops to the rabbitmq user, who must own the node's directory."""
    if os.geteuid() != 0:
        return
    try:
        import pwd

        user = pwd.getpwnam("rabbitmq")
    except (ImportError, KeyError):
        return
    for path in [base, *base.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid)


def url_for(vhost: str | None, port: int = 5672) -> str:
    return f"amqp://guest:guest@127.0.0.1:{port}/{vhost or ''}"


class OwnNode:
    """A RabbitMQ node of a test's own: started, stopped and restarted on its own data directory."""

    def __init__(self, port: int, consumer_timeout_ms: int | None = None) -> None:
        if shutil.which("rabbitmq-server") is None:
            unavailable("RabbitMQ (own node)", "rabbitmq-server is not installed")
        self.port, self.dist = port, port + 20000
        self.name = f"jbtest{port}@localhost"
        self.base = Path(tempfile.mkdtemp(prefix=f"jb-rabbit-{port}-"))
        config = self.base / "rabbitmq.conf"
        lines = [f"listeners.tcp.local = 127.0.0.1:{port}", "loopback_users = none"]
        if consumer_timeout_ms is not None:
            lines.append(f"consumer_timeout = {consumer_timeout_ms}")
        config.write_text("\n".join(lines) + "\n")
        (self.base / "enabled_plugins").write_text("[].\n")
        _owned_by_the_server(self.base)
        self.env = {**os.environ, "RABBITMQ_NODENAME": self.name, "RABBITMQ_NODE_PORT": str(port),
                    "RABBITMQ_DIST_PORT": str(self.dist), "RABBITMQ_BASE": str(self.base),
                    "RABBITMQ_MNESIA_BASE": str(self.base / "mnesia"), "RABBITMQ_LOG_BASE": str(self.base / "log"),
                    "RABBITMQ_CONFIG_FILE": str(config.with_suffix("")),
                    "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base / "enabled_plugins"),
                    "RABBITMQ_PID_FILE": str(self.base / "rabbit.pid"),
                    "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "ERL_EPMD_ADDRESS": "127.0.0.1"}

    @property
    def url(self) -> str:
        return url_for(None, self.port)

    def start(self, seconds: float = 120) -> None:
        subprocess.run(["rabbitmq-server", "-detached"], env=self.env, capture_output=True, timeout=60, check=False)
        ok = wait_for_port(self.port, seconds)
        if ok:
            waited = rabbitmqctl("await_startup", node=self.name, env=self.env, timeout=seconds)
            ok = waited.returncode == 0
        if not ok:
            unavailable("RabbitMQ (own node)", f"node {self.name} did not start on port {self.port}; "
                        f"see {self.base / 'log'}")

    def stop(self) -> None:
        rabbitmqctl("stop", node=self.name, env=self.env, timeout=120)
        deadline = time.monotonic() + 60
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.1)

    def kill(self) -> None:
        """Stop the node as a crash would: SIGKILL to its Erlang VM."""
        pid_file = self.base / "rabbit.pid"
        if pid_file.exists():
            subprocess.run(["kill", "-9", pid_file.read_text().strip()], check=False)
        deadline = time.monotonic() + 30
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.1)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)
