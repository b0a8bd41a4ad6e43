"""A PostgreSQL server a test starts itself, on its own port and data folder, to stop and restart freely.

The shared server on 5432 is never restarted; a test that restarts its store
gets one of these. PostgreSQL refuses to run as root, so under root every
command runs as the ``postgres`` user (``runuser``) on a folder that user owns.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.services import have, port_open, unavailable, wait_for_port


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


class PostgresServer:
    """One PostgreSQL cluster in a temporary folder, listening on 127.0.0.1:``port`` (trust auth)."""

    def __init__(self, port: int, bin_dir: Path) -> None:
        self.port, self.bin_dir = port, bin_dir
        self.as_root = os.geteuid() == 0
        # tmp_path lives under a folder only root may enter: the postgres user needs its own
        self.base = Path(tempfile.mkdtemp(prefix=f"jb-pg-{port}-"))
        self.data = self.base / "data"
        self.log = self.base / "server.log"
        if self.as_root:
            shutil.chown(self.base, "postgres", "postgres")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / program), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)

    def init(self) -> None:
        done = self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                         "--no-sync")
        if done.returncode != 0:
            unavailable("an own PostgreSQL", f"initdb failed: {done.stderr[-500:]}")

    def start(self) -> None:
        if port_open(self.port):
            unavailable("an own PostgreSQL", f"port {self.port} is already taken")
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c max_connections=60"
        done = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60",
                         "start")
        if done.returncode != 0 or not wait_for_port(self.port, 30):
            unavailable("an own PostgreSQL", f"pg_ctl start failed: {done.stderr[-300:]} {self.server_log()}")

    def stop(self, mode: str = "fast") -> None:
        """``immediate`` is a crash: no checkpoint, every connection cut, recovery from the WAL on start."""
        done = self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")
        if done.returncode != 0:
            raise AssertionError(f"pg_ctl stop -m {mode} failed: {done.stderr[-500:]}")

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", timeout=30).returncode == 0

    def server_log(self) -> str:
        try:
            return self.log.read_text()[-2000:]
        except OSError:
            return ""

    def remove(self) -> None:
        if self.data.exists() and self.running():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
        shutil.rmtree(self.base, ignore_errors=True)


@contextmanager
def own_postgres(port: int) -> Iterator[PostgresServer]:
    """A fresh cluster started for the block, stopped and deleted after it whatever happens."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        unavailable("an own PostgreSQL", "no initdb under /usr/lib/postgresql/*/bin")
        raise AssertionError("unreachable")  # unavailable() fails or skips
    if os.geteuid() == 0 and not have("runuser"):
        unavailable("an own PostgreSQL", "running as root and runuser is not on PATH")
    server = PostgresServer(port, bin_dir)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.remove()
