"""The Grafana dashboard and the Monitoring page name exactly the metrics jobbridge exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from jobbridge.integrations import prometheus

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: read from the store at scrape time (`StoreCollector`), not module-level metrics
SCRAPED = {"jobbridge_queue_jobs", "jobbridge_queue_oldest_waiting_age_seconds", "jobbridge_failed_jobs",
           "jobbridge_worker_up", "jobbridge_worker_processes"}


def exported() -> set[str]:
    names = {prometheus.ATTEMPTS._name + "_total", prometheus.DISPATCHES._name + "_total", prometheus.DURATION._name,
             prometheus.BUSY._name, prometheus.THREADS._name, prometheus.HELD._name}
    return names | SCRAPED


def base(name: str) -> str:
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def test_the_dashboard_uses_only_exported_names_and_shows_every_one() -> None:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {base(name) for expr in exprs for name in re.findall(r"jobbridge_[a-z_]+", expr)}
    assert used == exported()


def test_the_monitoring_page_documents_every_metric() -> None:
    page = (DOCS / "monitoring.md").read_text()
    assert {name for name in exported() if f"`{name}`" not in page} == set()
