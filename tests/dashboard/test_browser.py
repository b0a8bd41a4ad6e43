"""The dashboard in a real headless browser (Debian's chromium through Selenium), on SQLite and on Redis.

A real ``jobbridge worker`` and a real ``jobbridge dashboard`` run as
processes on one store; six jobs fail (a marker file makes them raise) and
three wait on a queue nobody works. The overview shows the counts and the
charts draw bars (a screenshot of the chart region has the failure colour in
it); the failed page lists each failure with its error; clicking Retry and
confirming puts the job back, and the worker runs it (the marker is gone by
then), which the job's output file proves. One browser serves the module.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.reliability_support import REPO, wait_for
from tests.services import ensure_chromium, ensure_redis, wait_for_port

pytestmark = pytest.mark.slow

APP = "tests.dashboard.dash_app:make_bridge"
FAILING = 6


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def jobbridge_command() -> list[str]:
    script = Path(sys.executable).with_name("jobbridge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium, chromedriver = ensure_chromium()
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1400"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=chromedriver))
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


class Running:
    """The worker and dashboard processes of one test, stopped (SIGTERM, then SIGKILL) at the end."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs, self.procs = env, logs, []  # type: list[subprocess.Popen[bytes]]

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.log", "wb") as out:
            proc = subprocess.Popen([*jobbridge_command(), *args, "-A", APP], cwd=REPO, env=self.env,
                                    stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def store_env(store: str, tmp_path: Path) -> dict[str, str]:
    if store == "redis":
        return {"DASH_STORE": ensure_redis(), "DASH_PREFIX": f"jbdash:{uuid.uuid4().hex[:8]}:"}
    return {"DASH_STORE": f"sqlite:///{tmp_path / 'dash.sqlite3'}", "DASH_PREFIX": ""}


def coloured_pixels(png: bytes, colour: tuple[int, int, int]) -> int:
    from PIL import Image

    raw = Image.open(io.BytesIO(png)).convert("RGB").tobytes()
    pixels = zip(raw[0::3], raw[1::3], raw[2::3], strict=True)
    return sum(1 for pixel in pixels if all(abs(a - b) <= 12 for a, b in zip(pixel, colour, strict=True)))


def shows(browser: Any, by: str, value: str, text: str, timeout: float = 30) -> None:
    """Wait until the page the browser is on has ``text`` in that element.

    A click on a form's button returns before the next page has loaded: the element found at
    once may be the old page's, and gone (stale) by the time it is read.
    """
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    def seen() -> bool:
        try:
            return text in browser.find_element(by, value).text
        except (NoSuchElementException, StaleElementReferenceException):
            return False

    wait_for(seen, f"the page to show {text!r}", timeout=timeout)


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_overview_failures_retry_and_charts_in_a_browser(store: str, browser: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from selenium.webdriver.common.by import By

    from tests.dashboard import dash_app

    env_vars = {**store_env(store, tmp_path), "DASH_DIR": str(tmp_path)}
    for key, value in env_vars.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "failing").write_text("")
    bridge = dash_app.make_bridge()
    bridge.driver().migrate()
    for n in range(FAILING):
        bridge.dispatch(dash_app.Flaky(n=n))
    for _ in range(3):
        bridge.dispatch(dash_app.Parked())
    failed = bridge.driver().failed
    running = Running({**os.environ, **env_vars, "PYTHONPATH": str(REPO)}, tmp_path)
    port = free_port()
    try:
        running.start("worker", "worker", "-Q", "default", "--concurrency", "2")
        running.start("dashboard", "dashboard", "--port", str(port))
        wait_for(lambda: failed.count() == FAILING, "the worker to fail every flaky job", timeout=60)
        assert wait_for_port(port, 30), (tmp_path / "dashboard.log").read_text()
        counters = dash_app.throughput_of(bridge.driver())
        assert counters is not None
        wait_for(lambda: sum(c.failed for c in counters.read(counters.now() - 3600)) >= FAILING,
                 "the worker's beat to add its counts", timeout=30)
        base = f"http://127.0.0.1:{port}"

        browser.get(f"{base}/")
        parked = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="parked"]')
        assert parked.find_element(By.CSS_SELECTOR, "td.waiting").text == "3"
        assert browser.find_element(By.ID, "failed-total").text == f"{FAILING} failed jobs"
        chart = browser.find_element(By.ID, "charts").screenshot_as_png
        assert coloured_pixels(chart, (0xC0, 0x39, 0x2B)) > 30  # the failed attempts' bars are drawn

        browser.get(f"{base}/failed")
        rows = browser.find_elements(By.CSS_SELECTOR, "#failed tr[data-id]")
        assert len(rows) == FAILING
        assert "could not reach the mail server" in rows[0].text
        job_id = rows[0].get_attribute("data-id")
        job = failed.get(job_id)
        assert job is not None
        number = dash_app.number_of(job.body)
        (tmp_path / "failing").unlink()
        rows[0].find_element(By.CSS_SELECTOR, "button.retry").click()
        shows(browser, By.TAG_NAME, "h1", "Retry failed jobs?")
        assert failed.get(job_id) is not None  # nothing happened before the confirmation
        browser.find_element(By.ID, "confirm").click()
        shows(browser, By.ID, "done", "Retried 1 failed job")
        wait_for(lambda: (tmp_path / f"done-{number}").exists(), "the worker to run the retried job", timeout=30)
        assert failed.count() == FAILING - 1 and failed.get(job_id) is None
    finally:
        running.stop()
        if store == "redis":
            driver: Any = bridge.driver()
            keys = driver.client.keys(f"{env_vars['DASH_PREFIX']}*")
            if keys:
                driver.client.delete(*keys)
        bridge.close()
