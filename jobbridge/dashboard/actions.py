"""The actions: retry or delete failed jobs (one, a selection, every match), cancel a job.

Each is a POST through `jobbridge.dashboard.rendering.gate` (authenticated,
CSRF-checked, refused in read-only mode). Retrying or deleting first answers a
confirmation page that says what will happen and to how many jobs, and acts
only when that page is submitted, so no single click loses a failed job.
"Every match" with no filter uses the store's own ``retry("all")`` and
``flush()``, which work in batches inside the store; with a filter it walks
the matches `BATCH` at a time, at most `MAX_MATCHES` per confirmation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from jobbridge.dashboard.rendering import Form, first, problem, redirect, render
from jobbridge.drivers.base import FailedFilter, FailedStore, ForgettingFailedStore
from jobbridge.errors import NoFailedJob

if TYPE_CHECKING:
    from jobbridge.dashboard.app import Dashboard

BATCH = 500
MAX_MATCHES = 10_000
_FILTER_KEYS = ("job", "queue", "error", "since", "until")


def _asked(form: Form) -> tuple[str, str, list[str]]:
    """What the pressed button asks: (retry | delete, selected | all, the ids)."""
    for key, action in (("retry_one", "retry"), ("delete_one", "delete")):
        if first(form, key):
            return action, "selected", [first(form, key)]
    action, scope = first(form, "action"), first(form, "scope", "selected")
    if first(form, "do"):
        action, _, scope = first(form, "do").partition(":")
    return action, scope, [i for i in form.get("id", []) if i]


def failed_action(dash: Dashboard, request: Request, form: Form) -> Response:
    action, scope, ids = _asked(form)
    if action not in ("retry", "delete") or scope not in ("selected", "all"):
        return problem(dash, request, 400, "Unknown action: the form asks to retry or delete, selected or all.")
    if scope == "selected" and not ids:
        return problem(dash, request, 400, "No failed job was selected: tick the jobs to act on first.")
    store = dash.view.driver().failed
    forgets = isinstance(store, ForgettingFailedStore)
    given = {key: first(form, key) for key in _FILTER_KEYS}
    where = _where(given)
    if action == "delete" and not forgets and not (scope == "all" and where is None):
        return problem(dash, request, 400, "This store cannot delete chosen failed jobs; it can delete them "
                                           "all (Delete all, with no filter) or retry them.")
    if first(form, "confirmed") != "1":
        many = store.count() if scope == "all" and where is None else None
        return render(dash, request, "confirm.html", page="failed", action=action, scope=scope, ids=ids,
                      given=given, filtered=where is not None, many=many)
    if scope == "selected":
        done = _retry_each(store, ids) if action == "retry" else _forget(store, ids)
    elif where is None:
        done = store.retry("all") if action == "retry" else store.flush()
    else:
        done = _each_match(store, where, action)
    return redirect(request, "/failed", done="retried" if action == "retry" else "deleted", n=done,
                    **{k: v for k, v in given.items() if v})


def _where(given: dict[str, str]) -> FailedFilter | None:
    """The list's filter as the confirmation form carried it; None when it filters nothing."""
    if not any(given.values()):
        return None
    from jobbridge.dashboard.pages import _moment

    return FailedFilter(queue=given["queue"] or None, name=given["job"] or None, since=_moment(given["since"]),
                        until=_moment(given["until"]), error=given["error"] or None)


def _retry_each(store: FailedStore, ids: list[str]) -> int:
    done = 0
    for job_id in ids:
        try:
            done += store.retry(job_id)
        except NoFailedJob:
            continue  # retried or deleted by someone else meanwhile
    return done


def _forget(store: FailedStore, ids: list[str]) -> int:
    assert isinstance(store, ForgettingFailedStore)
    return store.forget(ids)


def _each_match(store: FailedStore, where: FailedFilter, action: str) -> int:
    done = 0
    while done < MAX_MATCHES:
        batch = [job.id for job in store.list(min(BATCH, MAX_MATCHES - done), where)]
        if not batch:
            break
        moved = _retry_each(store, batch) if action == "retry" else _forget(store, batch)
        done += moved
        if moved == 0:
            break  # nothing could be moved: never loop on the same batch
    return done


def cancel_job(dash: Dashboard, request: Request, form: Form) -> Response:
    job_id = request.path_params["job_id"]
    if dash.view.bridge.results is None:
        return problem(dash, request, 400, "Cancelling needs a result store (the results setting): "
                                           "that is where cancellations are kept for every worker to see.")
    dash.view.bridge.cancel(job_id, terminate=first(form, "terminate") == "1")
    return redirect(request, f"/jobs/{job_id}", done="cancelled")
