from .mail import send_mail
from .reports import build_report


def signup(email):
    """The view: store the user (not shown), then mail them in a second, outside the request."""
    send_mail.apply_async(args=[email, "Welcome!", "Thanks for signing up."], countdown=1)
    return {"status": "ok"}


def start_report(rows):
    """POST /reports: start building it, answer at once with where to poll."""
    task = build_report.delay(rows)
    return {"task_id": task.id}, 202


def report_status(task_id):
    """GET /reports/<task_id>: what a progress bar polls."""
    task = build_report.AsyncResult(task_id)
    state = task.state
    if state == "PENDING":
        return {"state": state, "done": 0, "total": None}
    if state == "PROGRESS":
        return {"state": state, "done": task.info.get("done"), "total": task.info.get("total")}
    if state == "SUCCESS":
        return {"state": state, "result": task.info}
    return {"state": state, "error": str(task.info)}
