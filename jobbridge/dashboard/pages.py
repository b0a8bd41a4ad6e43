"""The pages that only read: overview, failed jobs (a list and one job), a job by id, workers, schedules."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import orjson
from starlette.requests import Request
from starlette.responses import Response

from jobbridge.dashboard.charts import failure_rate_chart, throughput_chart
from jobbridge.dashboard.rendering import Form, problem, redirect, render
from jobbridge.dashboard.store_view import Cursor
from jobbridge.drivers.base import FailedFilter
from jobbridge.envelope import Envelope
from jobbridge.errors import PayloadDecodeError

if TYPE_CHECKING:
    from jobbridge.dashboard.app import Dashboard

#: failed jobs per page unless ?size= says otherwise
PAGE_SIZE = 50
_ID = re.compile(r"^[A-Za-z0-9._:@-]{1,191}$")


def overview(dash: Dashboard, request: Request, form: Form) -> Response:
    data = dash.view.overview()
    charts = {
        "throughput_hour": throughput_chart(data.hour, "Attempts per minute, last hour"),
        "failures_hour": failure_rate_chart(data.hour, "Failure rate per minute, last hour"),
        "throughput_day": throughput_chart(data.day, "Attempts per 15 minutes, last day"),
        "failures_day": failure_rate_chart(data.day, "Failure rate per 15 minutes, last day"),
    }
    return render(dash, request, "overview.html", data=data, charts=charts, page="overview")


def parse_filter(request: Request) -> tuple[FailedFilter, dict[str, str], str | None]:
    """The list's filter from the query (job, queue, error, since, until), as given, and a problem if any."""
    q = request.query_params
    given = {key: q.get(key, "").strip() for key in ("job", "queue", "error", "since", "until")}
    try:
        since, until = _moment(given["since"]), _moment(given["until"])
    except ValueError:
        return FailedFilter(), given, "since and until take a UTC time: 2024-05-01T13:30 (or epoch seconds)"
    return FailedFilter(queue=given["queue"] or None, name=given["job"] or None, since=since, until=until,
                        error=given["error"][:200] or None), given, None


def _moment(text: str) -> float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    moment = datetime.fromisoformat(text)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def failed_list(dash: Dashboard, request: Request, form: Form) -> Response:
    where, given, bad = parse_filter(request)
    if bad:
        return render(dash, request, "failed.html", status=400, page="failed", given=given, problem=bad,
                      result=None, can_forget=False, filtered=False)
    cursor = Cursor.decode(request.query_params.get("cursor", ""))
    try:
        size = int(request.query_params.get("size", PAGE_SIZE))
    except ValueError:
        size = PAGE_SIZE
    result = dash.view.failed_page(where, cursor, size)
    done = request.query_params.get("done")
    return render(dash, request, "failed.html", page="failed", given=given, result=result, problem=None,
                  can_forget=dash.view.can_forget(), filtered=any(given.values()), cursor=cursor,
                  done=done if done in ("retried", "deleted") else None,
                  done_count=request.query_params.get("n", "0"), size=size)


def failed_one(dash: Dashboard, request: Request, form: Form) -> Response:
    job_id = request.path_params["job_id"]
    job = dash.view.driver().failed.get(job_id)
    if job is None:
        return problem(dash, request, 404, "No failed job has this id (retried or deleted meanwhile?).")
    payload = None
    if request.query_params.get("payload") == "1":
        try:
            payload = orjson.dumps(dict(Envelope.decode(job.body).payload), option=orjson.OPT_INDENT_2,
                                   default=str).decode()
        except PayloadDecodeError as exc:
            payload = f"(the stored body cannot be read: {exc})"
    return render(dash, request, "failed_job.html", page="failed", job=job, payload=payload,
                  can_forget=dash.view.can_forget())


def find_job(dash: Dashboard, request: Request, form: Form) -> Response:
    job_id = request.query_params.get("id", "").strip()
    if not job_id:
        return render(dash, request, "job.html", page="job", job=None)
    if not _ID.match(job_id):
        return problem(dash, request, 400, "A job id is letters, digits and . _ : @ - (at most 191).")
    return redirect(request, f"/jobs/{job_id}")


def job(dash: Dashboard, request: Request, form: Form) -> Response:
    job_id = request.path_params["job_id"]
    if not _ID.match(job_id):
        return problem(dash, request, 400, "A job id is letters, digits and . _ : @ - (at most 191).")
    return render(dash, request, "job.html", page="job", job=dash.view.job(job_id),
                  cancelled=request.query_params.get("done") == "cancelled")


def workers(dash: Dashboard, request: Request, form: Form) -> Response:
    found = dash.view.workers()
    return render(dash, request, "workers.html", page="workers", workers=found[0] if found else None,
                  now=found[1] if found else 0.0)


def schedules(dash: Dashboard, request: Request, form: Form) -> Response:
    return render(dash, request, "schedules.html", page="schedules", entries=dash.view.schedules())
