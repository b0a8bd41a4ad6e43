"""``python -m tests.dashboard.screenshots``: the PNGs of docs/dashboard.md, taken in headless chromium.

Builds a SQLite store in a temporary folder with a day of per-minute counters,
failures of three job types, waiting and delayed jobs, two worker heartbeats
and two schedule entries, serves the dashboard on a free loopback port and
saves one screenshot per page into docs/img/. Run it again after changing a
template.
"""

from __future__ import annotations

import os
import random
import socket
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

from jobbridge import Job, JobContext
from jobbridge.app import JobBridge
from jobbridge.dashboard import create_app
from jobbridge.drivers.throughput_port import MinuteCount, throughput_of
from jobbridge.drivers.worker_registry_port import WorkerBeat, worker_registry_of
from jobbridge.settings import Settings
from tests.services import ensure_chromium, wait_for_port

IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


class SendInvoice(Job, name="billing.invoice", queue="billing", tries=1):
    invoice_id: int
    email: str = "customer@example.com"

    def handle(self, ctx: JobContext) -> None:
        if self.invoice_id % 3 == 0:
            raise ConnectionError(f"payment gateway refused invoice {self.invoice_id}: 503 Service Unavailable")


class Welcome(Job, name="mail.welcome", queue="mail", tries=1):
    user_id: int

    def handle(self, ctx: JobContext) -> None:
        if self.user_id % 4 == 0:
            raise TimeoutError("the SMTP server did not answer within 30 s")


def populate(bridge: JobBridge) -> str:
    for n in range(1, 25):
        bridge.dispatch(SendInvoice(invoice_id=n))
        bridge.dispatch(Welcome(user_id=n))
    bridge.run_pending()
    for n in range(40):
        bridge.dispatch(Welcome(user_id=100 + n))
    for n in range(6):
        bridge.dispatch(SendInvoice(invoice_id=1000 + n), delay=3600)
    driver = bridge.driver()
    counters, registry = throughput_of(driver), worker_registry_of(driver)
    assert counters is not None and registry is not None
    now, rng = counters.now(), random.Random(3)
    minutes = []
    for k in range(24 * 60):
        minute = int(now // 60) * 60 - k * 60
        load = 40 + int(30 * abs(((k // 60) % 12) - 6) / 6) + rng.randint(0, 15)
        bad = rng.randint(0, 3) + (12 if 95 <= k <= 110 else 0)
        minutes.append(MinuteCount(minute, "mail", load, bad // 2, bad - bad // 2))
        minutes.append(MinuteCount(minute, "billing", load // 3, rng.randint(0, 1)))
    counters.add(minutes)
    for i, queues in enumerate((("billing", "mail"), ("mail",))):
        registry.beat(WorkerBeat(id=f"web-{i}", name=f"worker-{i + 1}@app-host", host="app-host", pid=4100 + i,
                                 connection="default", queues=queues, concurrency=8, started_at=now - 7200,
                                 last_beat=now - i * 2, running=3 - i, processed=51_230 - i * 9_000,
                                 failed=112 - i * 40))
    return driver.failed.list(1)[0].id


def shoot(browser: object, url: str, name: str) -> None:
    browser.get(url)  # type: ignore[attr-defined]
    height = browser.execute_script("return document.documentElement.scrollHeight")  # type: ignore[attr-defined]
    browser.set_window_size(1280, min(max(int(height) + 20, 500), 2000))  # type: ignore[attr-defined]
    browser.save_screenshot(str(IMG / f"dashboard-{name}.png"))  # type: ignore[attr-defined]
    print(f"docs/img/dashboard-{name}.png")


def main() -> None:
    chromium, chromedriver = ensure_chromium()
    from selenium import webdriver

    folder = Path(tempfile.mkdtemp(prefix="jb-shots-"))
    bridge = JobBridge(Settings.from_mapping({"driver": "database", "database_url": f"sqlite:///{folder}/s.db",
                                              "results": "database"}), jobs=[SendInvoice, Welcome])
    bridge.schedule("nightly-invoices", SendInvoice, fields={"invoice_id": 1}, cron="0 2 * * *", tz="Europe/Paris")
    bridge.schedule("welcome-digest", Welcome, fields={"user_id": 2}, every=900)
    bridge.driver().migrate()
    failed_id = populate(bridge)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(create_app(bridge), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    assert wait_for_port(port, 20)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars"):
        options.add_argument(arg)
    browser = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=chromedriver))
    IMG.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for path, name in (("/", "overview"), ("/failed", "failed"), (f"/failed/{failed_id}", "failed-job"),
                           (f"/jobs/{failed_id}", "job"), ("/workers", "workers"), ("/schedules", "schedules")):
            shoot(browser, base + path, name)
    finally:
        browser.quit()
        server.should_exit = True
        time.sleep(0.2)
        os.environ.pop("JOBBRIDGE_DRIVER", None)


if __name__ == "__main__":
    main()
