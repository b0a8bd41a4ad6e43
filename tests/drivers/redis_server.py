"""A redis-server a test starts on its own port, to kill, restart or misconfigure freely.

The shared server on 6379 is never reconfigured or flushed; anything that needs
that gets one of these instead.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.services import have, port_open, unavailable, wait_for_port


class RedisServer:
    """One redis-server process on ``port`` with its data in ``directory``."""

    def __init__(self, port: int, directory: Path, *options: str) -> None:
        self.port, self.directory, self.options = port, directory, options
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        if port_open(self.port):
            unavailable("an own redis-server", f"port {self.port} is already taken")
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--save", "", *self.options],
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        if not wait_for_port(self.port, 10):
            self.kill()
            unavailable("an own redis-server", f"port {self.port} did not open")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final fsync."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None

    def restart(self) -> None:
        self.kill()
        self.start()


@contextmanager
def own_redis(port: int, directory: Path, *options: str) -> Iterator[RedisServer]:
    """A server started for the duration of the block, and killed after it whatever happens."""
    if not have("redis-server"):
        unavailable("redis-server", "the binary is not on PATH")
    server = RedisServer(port, directory, *options)
    server.start()
    try:
        yield server
    finally:
        server.kill()
